"""The trace loader's C column pass (analyzers/traces/_kineto_columns.c) against the best
well-kept decoder, msgspec's typed structs turned into columns, on a large multi-rank set (issue
29): same files, same process, the same loader loop (analyzers/traces/load_fast.py) with its C
pass swapped for the structs over the whole lines of each chunk (the sets write one event a
line), interleaved. The structs decoder lives here, as the peer: issue 29 removed it from
the product when this benchmark kept the C pass.

    .venv/bin/python -m bench.trace_decoders DIR [--reps 3]

DIR is a set from `bench.trace_sets` (plain JSON, so no inflate is timed). Each rep loads every
file once with each decoder (order alternating), timed by CPU time of the process
(`time.process_time`: the machine is shared, wall time would count other jobs); the best rep of
each is kept, and the columns of the two are checked equal. The rule (issue 29): the C pass stays
only if it is at least 2x faster than the best well-kept decoder (and fuzzed).

Beside them, decode only (no columns): orjson (when installed) and msgspec decoding the same
events into plain dicts and lists, in 4 MiB batches cut at the sets' one-event-a-line breaks. No
decoder built on those can be faster than its decode alone, so these are lower bounds for an
orjson- or dict-based loader.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from itertools import compress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from analyzers.traces import load_fast
from analyzers.traces.columns import ColumnBuilder, SymbolTable
from analyzers.traces.load import RawTrace, load_raw_trace

if TYPE_CHECKING:
    import numpy.typing as npt

    I32 = npt.NDArray[np.int32]
    I64 = npt.NDArray[np.int64]


class _Args(msgspec.Struct, frozen=True, gc=False):
    """The `args` keys the columns use (column names in RawTrace); the rest are skipped in C."""

    # Absent is the column's default; an explicit null fails validation and sends the batch to
    # the reference rules (which also read it as the default).
    stream: int = -1
    correlation: int = -1
    bandwidth: int | float = msgspec.field(default=0.0, name="memory bandwidth (GB/s)")
    blocks_per_sm: int | float = msgspec.field(default=float("nan"), name="blocks per SM")
    nbytes: int = msgspec.field(default=-1, name="bytes")
    external_id: int | None = msgspec.field(default=None, name="External id")
    external_id_2021: int | None = msgspec.field(default=None, name="external id")
    device_type: int | None = msgspec.field(default=None, name="Device Type")
    total_allocated: int | float | None = msgspec.field(default=None, name="Total Allocated")


# An event without `args` (told apart from `"args": {}` by identity: `[memory]` rows need that).
_NO_ARGS = _Args()


class _Event(msgspec.Struct, gc=False):
    cat: str | None = None
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: int | float | None = None
    dur: int | float | None = None
    args: _Args = _NO_ARGS


_BATCH = msgspec.json.Decoder(list[_Event])
_C_DECODE = load_fast._Events.decode
_OPEN, _CLOSE = b"[]"


def _structs_decode(self: load_fast._Events, text: load_fast._Text) -> int:
    """`_Events.decode` by msgspec's typed structs: the events up to the text's last `},` and a
    newline, decoded in place as one array; what they refuse is left to the walk."""
    buf = text.data
    cut = buf.rfind(b"},\n", 0, text.length) + 1
    if cut <= 0:
        return 0
    first = buf[0]
    buf[0], buf[cut] = _OPEN, _CLOSE
    try:
        with memoryview(buf) as view, view[: cut + 1] as batch:
            events = _BATCH.decode(batch)
        blocks = _reduce(events, self.position, self.cols)
    except (msgspec.ValidationError, OverflowError):
        return 0
    finally:
        buf[0], buf[cut] = first, ord(",")
    self.cols.add_blocks(blocks)
    self.position += len(events)
    return cut


def _ints(values: list[int | None]) -> I64:
    """Integers, None -> -1 (the columns' "absent")."""

    try:
        return np.array(values, dtype=np.int64)
    except TypeError:  # a None
        return np.array([-1 if v is None else v for v in values], dtype=np.int64)


def _symbols(table: SymbolTable, columns: tuple[list[Any], ...]) -> list[I32]:
    """Symbol ids of each column, looked up column by column in C. Values not seen before are
    interned first, in event order and cat/name/pid/tid within an event: the order in which the
    per-event reduction assigns ids, so both paths give every symbol the same id."""

    get = table.get
    codes = [list(map(get, column)) for column in columns]
    out: list[I32] = []
    stale: list[int] = []
    for c, column_codes in enumerate(codes):
        try:
            out.append(np.array(column_codes, dtype=np.int32))
        except TypeError:  # a None from `get`
            stale.append(c)
            out.append(np.zeros(0, dtype=np.int32))
    if stale:
        # Only each new value's first row matters (later rows find it interned); a dict built
        # from the rows backwards keeps the first. Then interned in (row, column) order.
        fresh = []
        for c in stale:
            column = columns[c]
            rows = [i for i, code in enumerate(codes[c]) if code is None]
            first = dict(zip([column[i] for i in reversed(rows)], reversed(rows), strict=True))
            fresh += [(i, c, value) for value, i in first.items()]
        for _, _, value in sorted(fresh, key=lambda f: (f[0], f[1])):
            table[value]  # interns it
        for c in stale:
            out[c] = np.array(list(map(get, columns[c])), dtype=np.int32)
    return out


def _reduce(events: list[_Event], base: int, cols: ColumnBuilder) -> dict[str, npt.NDArray[Any]]:
    """One batch as column blocks, by the rules of `columns.event_sink` (kept rows: a `dur`, a
    `ts` and a `cat` other than `Trace`; `[memory]` counters among the others)."""

    if not events:
        return {}
    ts = [e.ts for e in events]
    ts_types = set(map(type, ts))
    if float in ts_types:
        cols.ts_has_float = True
    if type(None) in ts_types:
        cols.ts_all_present = False
    # None -> NaN (msgspec refuses NaN literals); integers convert as the stdlib path's do.
    ts_all = np.array(ts, dtype=np.float64)
    dur_all = np.array([e.dur for e in events], dtype=np.float64)
    cat_all = [e.cat for e in events]
    kept = ~(np.isnan(ts_all) | np.isnan(dur_all))
    kept_list = kept.tolist()
    cat = list(compress(cat_all, kept_list))
    # A timed event without a `cat` or of `cat` Trace (one a file) is rare: the whole batch's
    # categories are compared as objects only then.
    if cat.count(None) or cat.count("Trace"):
        cats = np.array(cat_all, dtype=object)
        kept &= (cats != None) & (cats != "Trace")  # noqa: E711
        kept_list = kept.tolist()
        cat = list(compress(cat_all, kept_list))
    rows = np.flatnonzero(kept)
    blocks: dict[str, npt.NDArray[Any]] = {}
    if len(rows) < len(events):
        blocks.update(_memory_counters(list(compress(events, (~kept).tolist()))))
        events = list(compress(events, kept_list))
        if not events:
            return blocks
    cat_ids, name, pid, tid = _symbols(
        cols.symbols,
        (
            cat,
            [e.name for e in events],
            [e.pid for e in events],
            [e.tid for e in events],
        ),
    )
    args = [e.args for e in events]
    external: list[int | None] = [a.external_id for a in args]
    external_2021 = [a.external_id_2021 for a in args]
    if external_2021.count(None) < len(external_2021):  # "external id", 2021 runtime events
        external = [x if x is not None else y for x, y in zip(external, external_2021, strict=True)]
    blocks.update(
        index=rows.astype(np.int64) + base,
        cat=cat_ids,
        name=name,
        pid=pid,
        tid=tid,
        ts=ts_all[rows],
        dur=dur_all[rows],
        stream=np.array([a.stream for a in args], dtype=np.int64),
        correlation=np.array([a.correlation for a in args], dtype=np.int64),
        memory_bw_gbps=np.array([a.bandwidth for a in args], dtype=np.float64),
        blocks_per_sm=np.array([a.blocks_per_sm for a in args], dtype=np.float64),
        bytes=np.array([a.nbytes for a in args], dtype=np.int64),
        external_id=_ints(external),
    )
    return blocks


def _memory_counters(others: list[_Event]) -> dict[str, npt.NDArray[Any]]:
    """`[memory]` instant events (not rows) that have a `ts` and `args`."""

    counters = [
        e for e in others if e.name == "[memory]" and e.ts is not None and e.args is not _NO_ARGS
    ]
    if not counters:
        return {}
    args = [e.args for e in counters]
    return {
        "mem_ts": np.array([e.ts for e in counters], dtype=np.float64),
        "mem_device_type": _ints([a.device_type for a in args]),
        "mem_total_allocated": np.array([a.total_allocated for a in args], dtype=np.float64),
    }


_BATCH_BYTES = 4 << 20
_COLUMN_FIELDS = (
    "index",
    "cat",
    "name",
    "pid",
    "tid",
    "ts",
    "dur",
    "stream",
    "correlation",
    "blocks_per_sm",
)


def _load_all(files: list[Path], c_pass: bool) -> tuple[float, list[RawTrace]]:
    load_fast._Events.decode = _C_DECODE if c_pass else _structs_decode  # type: ignore[method-assign]
    try:
        t0 = time.process_time()
        raws = [load_raw_trace(f) for f in files]
        return time.process_time() - t0, raws
    finally:
        load_fast._Events.decode = _C_DECODE  # type: ignore[method-assign]


def _decode_only(files: list[Path], loads: Callable[[bytes], object]) -> float:
    """CPU seconds to decode every event of every file into Python objects, nothing else."""
    seconds = 0.0
    for path in files:
        data = path.read_bytes()
        at = data.index(b"[", data.index(b'"traceEvents"')) + 1
        end = data.rindex(b"]")
        t0 = time.process_time()
        while at < end:
            cut = data.find(b",\n", at + _BATCH_BYTES)
            cut = end if cut < 0 else cut
            loads(b"[" + data[at:cut] + b"]")
            at = cut + 1
        seconds += time.process_time() - t0
    return seconds


def _same(a: RawTrace, b: RawTrace) -> bool:
    return a.names == b.names and all(
        np.array_equal(getattr(a, f), getattr(b, f), equal_nan=f in ("ts", "dur", "blocks_per_sm"))
        for f in _COLUMN_FIELDS
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    files = sorted(p for p in args.folder.iterdir() if p.name.endswith((".json", ".gz")))
    size_mb = sum(p.stat().st_size for p in files) / 1e6
    best = {"c": float("inf"), "msgspec": float("inf")}
    for rep in range(args.reps):
        order = ("c", "msgspec") if rep % 2 == 0 else ("msgspec", "c")
        loaded = {}
        for name in order:
            seconds, raws = _load_all(files, c_pass=name == "c")
            best[name] = min(best[name], seconds)
            loaded[name] = raws
            print(f"rep {rep} {name:8s} {seconds:.2f} s CPU", flush=True)
        if rep == 0 and not all(
            _same(a, b) for a, b in zip(loaded["c"], loaded["msgspec"], strict=True)
        ):
            raise SystemExit("the two decoders gave different columns")
        del loaded
    peers: dict[str, Callable[[bytes], object]] = {"msgspec dicts": msgspec.json.decode}
    try:
        import orjson

        peers["orjson dicts"] = orjson.loads
    except ModuleNotFoundError:
        print("orjson is not installed: no orjson row", flush=True)
    for name, loads in peers.items():
        seconds = min(_decode_only(files, loads) for _ in range(args.reps))
        print(
            f"{name} (decode only) {seconds:.2f} s CPU, C pass {seconds / best['c']:.2f}x faster",
            flush=True,
        )
    ratio = best["msgspec"] / best["c"]
    print(
        f"| {args.folder.name} | {len(files)} | {size_mb:.0f} | {best['c']:.2f} | "
        f"{best['msgspec']:.2f} | {ratio:.2f}x | {size_mb / best['c']:.0f} | "
        f"{size_mb / best['msgspec']:.0f} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
