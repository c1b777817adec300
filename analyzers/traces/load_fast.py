"""The fast decoder for Kineto traces: batches of `traceEvents` go straight to column blocks, by
the C pass of analyzers/traces/_kineto_columns.c where it is built, else (and for every batch it
leaves) by msgspec decoding them into small typed structs, skipping every field no analysis reads,
and numpy turning those into columns. Both give the same columns (tests hold them to it); the C
pass takes only strict JSON of the shapes the structs describe, so msgspec decides everything else.

Why: decoding each event into a dict with stdlib `json` and reducing it in Python was about 90 % of
the load (RawTrace's columns need 13 numbers of an event and its `args`); msgspec skips the other
fields in C and decodes about 7x faster than `json.loads` on these files. HTA's `json.load` of the
whole document is what makes its memory 4x ours, so batches stay bounded: the decompressed text is
read in chunks and cut after the last `},` of the buffer. A cut is checked, not trusted: `[` + text
+ `]` decodes only if the cut fell between two elements of `traceEvents` (inside a string or a
nested object the brackets or quotes would not balance), and a rejected cut is retried at an
earlier `},`.

What it must never do: accept a file the stdlib path refuses, or read a value differently. It
decodes only what the strict struct types describe; a batch with anything else (a string stream id,
a null `args`, an integer beyond int64) is decoded into dicts and reduced by `columns.event_sink`,
the reference rules. Anything it cannot decode at all (a truncated or corrupt file, NaN literals,
lone surrogates, a top level it does not recognise) makes `decode_fast` return None, and `load.py`
reads the file again with the stdlib parser, which says what is wrong. Never imports pandas.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable
from itertools import compress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from analyzers.traces.columns import ColumnBuilder, SymbolTable, event_sink
from analyzers.traces.trace_text import GZIP_ERRORS, TextSource

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    I32 = npt.NDArray[np.int32]
    I64 = npt.NDArray[np.int64]

__all__ = ["COLUMNS_PATH", "decode_fast"]

# The C pass from text to columns (analyzers/traces/_kineto_columns.c: the same columns for ~1/3
# of the CPU that msgspec's structs turned into columns here take); an optional extension, so
# without a compiler every batch takes the msgspec path below. None forces that path (tests).
_decode_columns: Callable[[Any, int, SymbolTable], Any] | None
COLUMNS_PATH: str
try:
    from analyzers.traces import _kineto_columns

    _decode_columns = _kineto_columns.decode_events
    COLUMNS_PATH = "c"
except ImportError:  # pragma: no cover - exercised where the extension is not built
    _decode_columns = None
    COLUMNS_PATH = "msgspec"

_KEY = b'"traceEvents"'
_KEY_RE = re.compile(rb"[ \t\n\r]*:[ \t\n\r]*\[")
_JSON_WS = b" \t\n\r"
# Give up on the fast path when this much text is buffered without a decodable batch (a corrupt
# file, or a top level that is not the usual one); the stdlib path then reads it with bounded memory.
_MAX_BUFFER = 64 << 20
_CUT = b"},"
_OPEN, _CLOSE, _COMMA = b"[],"
_CUT_TRIES = 4


class _Args(msgspec.Struct, frozen=True, gc=False):
    """The `args` keys the columns use (column names in RawTrace); the rest are skipped in C."""

    # Absent is the column's default; an explicit null fails validation and sends the batch to
    # the reference rules (which also read it as the default).
    stream: int = -1
    correlation: int = -1
    bandwidth: int | float = msgspec.field(default=0.0, name="memory bandwidth (GB/s)")
    nbytes: int = msgspec.field(default=-1, name="bytes")
    external_id: int | None = msgspec.field(default=None, name="External id")
    external_id_2021: int | None = msgspec.field(default=None, name="external id")
    device_type: int | None = msgspec.field(default=None, name="Device Type")
    device_id: int | None = msgspec.field(default=None, name="Device Id")
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
_ANY = msgspec.json.Decoder()
_TAIL = msgspec.json.Decoder(dict[str, msgspec.Raw])
_META = msgspec.json.Decoder(dict[str, Any])
_DECODE_ERRORS = (msgspec.MsgspecError, ValueError)


class _Fallback(Exception):
    """The fast path cannot read this file; the stdlib path will (or will say why not)."""


_READ_ERRORS: tuple[type[BaseException], ...] = (
    _Fallback,
    OSError,
    EOFError,
    zlib.error,
    *GZIP_ERRORS,
    *_DECODE_ERRORS,
)


def decode_fast(
    path: Path, cols: ColumnBuilder, chunk_size: int
) -> tuple[dict[str, Any], int | None] | None:
    """Fill `cols` from the file; return (top-level metadata, HTA's rank), or None when the
    stdlib path must read the file instead (then `cols` is garbage)."""
    try:
        source = TextSource(path, chunk_size)
    except OSError:
        return None
    try:
        return _decode(source, cols, path), source.hta_rank
    except _READ_ERRORS:
        return None
    except (TypeError, ValueError, OverflowError):  # a malformed event: the stdlib path names it
        return None
    except RecursionError:  # nesting past msgspec's depth: the stdlib path names the value
        return None
    finally:
        source.close()


class _Text:
    """The text not decoded yet, at the start of one bytearray that is allocated once (and grows
    only for an element longer than it). Why not `del buf[:cut]` then `buf += chunk`: CPython
    gives a bytearray whose head was dropped a fresh buffer on every growth, ~1 MiB a chunk, and
    the allocator maps and faults in its pages each time (~3,000 page faults, 5-10 ms of a
    large trace's load in a fresh process, issue 19)."""

    def __init__(self, capacity: int) -> None:
        self.data = bytearray(capacity)
        self.length = 0

    def append(self, chunk: bytes) -> None:
        end = self.length + len(chunk)
        if end > len(self.data):
            self.data.extend(bytes(max(end, 2 * len(self.data)) - len(self.data)))
        # Through a memoryview: a bytearray's slice assignment copies a `bytes` value first.
        with memoryview(self.data) as view:
            view[self.length : end] = chunk
        self.length = end

    def drop(self, count: int) -> None:
        """Drop the first `count` bytes (the rest is short: part of one element)."""
        rest = self.length - count
        self.data[:rest] = self.data[count : self.length]
        self.length = rest

    def find(self, sub: bytes, start: int = 0) -> int:
        return self.data.find(sub, start, self.length)


def _decode(source: TextSource, cols: ColumnBuilder, path: Path) -> dict[str, Any]:
    # The members before `traceEvents`: `{`, members, `,` decode as an object once the comma is
    # replaced by `}`, and only if the key really is a top-level key.
    text = _Text(2 * source.chunk_size + 64)
    buf = text.data
    while (key_at := text.find(_KEY)) < 0 or (text.length < key_at + 64 and not source.eof):
        if source.eof or text.length > _MAX_BUFFER:
            raise _Fallback
        text.append(source.read())
        buf = text.data
    head = bytes(buf[:key_at]).rstrip(_JSON_WS)
    if head.lstrip(_JSON_WS) == b"{":
        metadata = {}
    elif head.endswith(b",") and head[:-1].strip(_JSON_WS) != b"{":
        metadata = _META.decode(head[:-1] + b"}")
    else:
        raise _Fallback
    opening = _KEY_RE.match(buf, key_at + len(_KEY), text.length)
    if opening is None:  # not `"traceEvents": [`: the stdlib path says what it is
        raise _Fallback
    # From here on the text's first byte is the `[` or `,` before the next element.
    text.drop(opening.end() - 1)
    batches = _Batches(cols, path)
    # Where the search for a `},` starts: past the text already searched in vain, so a run of
    # text without one (a gzip bomb of spaces) is searched once, not once a chunk.
    searched = 0
    while True:
        if not source.eof and text.length < source.chunk_size:
            text.append(source.read())
            continue
        cut = 0
        if text.find(_CUT, max(1, searched - 1)) >= 0:
            cut = _decode_batch(text.data, text.length, batches)
        else:
            searched = text.length
        if cut:
            text.drop(cut)
            searched = 0
        elif source.eof:
            break
        elif text.length > _MAX_BUFFER:
            raise _Fallback
        else:
            text.append(source.read())
    # What is left: the last elements, `]`, and the members after `traceEvents`, decoded as
    # `{"traceEvents": [` + rest, so that the last element and the array's end need no cut.
    if text.find(_KEY) >= 0:
        raise _Fallback  # a second `traceEvents` key: the stdlib path reads both, as before
    buf = text.data
    buf[0] = _OPEN
    tail = _TAIL.decode(b'{"traceEvents":' + buf[: text.length])
    batches.decode(tail.pop("traceEvents"))
    for key, raw in tail.items():
        metadata[key] = _ANY.decode(raw)
    cols.count = batches.position
    return metadata


def _decode_batch(buf: bytearray, end: int, batches: _Batches) -> int:
    """Decode the whole elements in `buf[:end]` (after its first byte, a `[` or `,`); return
    the position of the `,` after the last one decoded (0: no cut found that decodes).

    The batch is decoded in place, without a copy: its first byte becomes `[` and the `,` after
    it becomes `]` for the duration of the call.
    """
    for _ in range(_CUT_TRIES):
        cut = buf.rfind(_CUT, 1, end)
        if cut < 0:
            return 0
        buf[0] = _OPEN
        buf[cut + 1] = _CLOSE
        try:
            with memoryview(buf) as view, view[: cut + 2] as batch:
                batches.decode(batch)
        except _DECODE_ERRORS:
            end = cut
            continue
        finally:
            buf[cut + 1] = _COMMA
        return cut + 1
    return 0


class _Batches:
    """Turns decoded batches of events into column blocks; counts events (HTA's `index`)."""

    def __init__(self, cols: ColumnBuilder, path: Path) -> None:
        self.cols = cols
        self.path = path
        self.position = 0

    def decode(self, text: memoryview | msgspec.Raw) -> None:
        """Decode one JSON array of events; raise a msgspec error if it is not valid JSON (so the
        caller can try another cut) and fall back to dicts if it is but the types are not ours.
        The C pass goes first; whatever it does not take (None) msgspec decides."""
        if _decode_columns is not None and self._columns(text):
            return
        try:
            events = _BATCH.decode(text)
        except msgspec.ValidationError:
            self._reference(_ANY.decode(text))
            return
        try:
            blocks = _reduce(events, self.position, self.cols)
        except OverflowError:  # an integer beyond int64: the reference rules decide
            self._reference(_ANY.decode(text))
            return
        self.cols.add_blocks(blocks)
        self.position += len(events)

    def _columns(self, text: memoryview | msgspec.Raw) -> bool:
        """The batch through the C pass; False when it leaves the batch to msgspec."""
        assert _decode_columns is not None
        cols = self.cols
        decoded = _decode_columns(text, self.position, cols.symbols)
        if decoded is None:
            return False
        count, ts_has_float, ts_all_present, columns = decoded
        if ts_has_float:
            cols.ts_has_float = True
        if not ts_all_present:
            cols.ts_all_present = False
        if columns:
            cols.add_blocks(columns)
        self.position += count
        return True

    def _reference(self, events: object) -> None:
        if not isinstance(events, list):
            raise _Fallback
        add = event_sink(self.cols, self.path)
        position = self.position
        for ev in events:
            add(ev, position)
            position += 1
        self.cols.flush()
        self.position = position


def _ints(values: list[int | None]) -> I64:
    """Integers, None -> -1 (the columns' "absent")."""
    import numpy as np

    try:
        return np.array(values, dtype=np.int64)
    except TypeError:  # a None
        return np.array([-1 if v is None else v for v in values], dtype=np.int64)


def _symbols(table: SymbolTable, columns: tuple[list[Any], ...]) -> list[I32]:
    """Symbol ids of each column, looked up column by column in C. Values not seen before are
    interned first, in event order and cat/name/pid/tid within an event: the order in which the
    per-event reduction assigns ids, so both paths give every symbol the same id."""
    import numpy as np

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
    import numpy as np

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
        bw=np.array([a.bandwidth for a in args], dtype=np.float64),
        nbytes=np.array([a.nbytes for a in args], dtype=np.int64),
        ext=_ints(external),
    )
    return blocks


def _memory_counters(others: list[_Event]) -> dict[str, npt.NDArray[Any]]:
    """`[memory]` instant events (not rows) that have a `ts` and `args`."""
    import numpy as np

    counters = [
        e for e in others if e.name == "[memory]" and e.ts is not None and e.args is not _NO_ARGS
    ]
    if not counters:
        return {}
    args = [e.args for e in counters]
    return {
        "mem_ts": np.array([e.ts for e in counters], dtype=np.float64),
        "mem_type": _ints([a.device_type for a in args]),
        "mem_dev": _ints([a.device_id for a in args]),
        "mem_total": np.array([a.total_allocated for a in args], dtype=np.float64),
    }
