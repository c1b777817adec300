"""Column buffers for one trace file (`ColumnBuilder`: load_fast.py's C pass appends whole blocks,
its walk one event at a time) and `event_sink`, the reference reduction of one decoded event to
a row (what a row holds: `frame.RowColumns`). Never decodes JSON or reads files.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from math import isfinite, nan
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from analyzers.traces.frame import ROW_COLUMNS, RowColumns
from fleetscope.errors import CorruptTraceError, NonFiniteTraceError, TraceError

if TYPE_CHECKING:
    import numpy.typing as npt

CHUNK_SIZE = 1 << 20  # decompressed bytes read at a time: bounds the memory of a load

# Every column of RawTrace that grows with the file, and its dtype as `RowColumns` declares it.
_NUMPY_DTYPE = {"I64": "int64", "I32": "int32", "F64": "float64"}
DTYPES = {f.name: _NUMPY_DTYPE[f.type] for f in fields(RowColumns) if f.type in _NUMPY_DTYPE}

# A run of one column's values: an array, or the C pass's bytearray of them (native byte order).
Block: TypeAlias = "npt.NDArray[Any] | bytearray"

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_NO_ARGS: dict[str, Any] = {}


class SymbolTable(dict[object, int]):
    """Raw `cat`/`name`/`pid`/`tid` value -> symbol id, interned on first lookup (a dict, so Python
    runs only for new values). Non-strings (integer pids) share their `str()`'s symbol; None is -1.
    `names[id]` is a symbol's text."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []
        self.ids: dict[str, int] = {}
        self[None] = -1

    def __missing__(self, value: object) -> int:
        text = value if isinstance(value, str) else str(value)
        sym = self.ids.get(text)
        if sym is None:
            sym = self.ids[text] = len(self.names)
            self.names.append(text)
        self[value] = sym
        return sym


class ColumnBuilder:
    """Append-only columns: per-event appends to lists (the fastest from Python), per-batch ones
    to blocks; `flush()` turns pending lists into a block so the two stay in file order."""

    def __init__(self, path: object) -> None:
        self.path = path
        self.symbols = SymbolTable()
        self.lists: dict[str, list[Any]] = {key: [] for key in DTYPES}
        self.blocks: dict[str, list[npt.NDArray[Any]]] = {key: [] for key in DTYPES}
        self.ts_has_float = False
        self.ts_all_present = True
        self.count = 0

    def add_blocks(self, blocks: Mapping[str, Block]) -> None:
        """Append one batch; `blocks` holds the row columns, or the memory-counter ones, or both."""
        self.flush()
        for key, block in blocks.items():
            if isinstance(block, bytearray):
                block = np.frombuffer(block, DTYPES[key])
            self.blocks[key].append(block)

    def flush(self) -> None:
        """A value its column cannot hold (a timestamp of 10**320) refuses the file."""
        try:
            for key, pending in self.lists.items():
                if pending:
                    self.blocks[key].append(np.array(pending, dtype=DTYPES[key]))
                    pending.clear()
        except (TypeError, ValueError, OverflowError) as exc:
            raise CorruptTraceError(
                f"{self.path}: not a Kineto trace: a value does not fit its column "
                f"({type(exc).__name__}: {exc})"
            ) from exc

    def column(self, key: str) -> npt.NDArray[Any]:
        self.flush()
        blocks = self.blocks[key]
        if not blocks:
            return np.zeros(0, dtype=DTYPES[key])
        whole = blocks[0] if len(blocks) == 1 else np.concatenate(blocks)
        self.blocks[key] = [whole]  # the blocks go now, not when the builder does
        return whole


def as_int(value: object, default: int) -> int:
    """HTA's `int(value)` with `default` on failure (an integer past int64 is one too)."""
    if value is None:
        return default
    try:
        number = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):
        return default
    return number if _INT64_MIN <= number <= _INT64_MAX else default


def as_float(value: object, default: float) -> float:
    if value is None:
        return default
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return default


def event_sink(cols: ColumnBuilder) -> Callable[[object, int], None]:
    """The reference rules reducing one decoded event to column values. An event of the wrong
    shape (a list where a name goes) is a CorruptTraceError naming it, not a bare TypeError."""
    path, ids = cols.path, cols.symbols
    appends = [cols.lists[key].append for key in ROW_COLUMNS]

    def add(ev: object, position: int) -> None:
        if type(ev) is not dict:
            raise CorruptTraceError(f"{path}: traceEvents[{position}] is not an object: {ev!r:.80}")
        try:
            get = ev.get
            ts = get("ts")
            # A JSON number that is NaN or an infinity (a literal, or past float's range) is
            # refused below; text where a number goes stays the unreadable NaN it always was.
            field = ""  # the one that is
            if type(ts) is not int:
                if ts is None:
                    cols.ts_all_present = False
                else:
                    cols.ts_has_float = True
                    if type(ts) is not float:
                        ts = as_float(ts, nan)
                    elif not isfinite(ts):
                        field = "ts"
            dur = get("dur")
            cat = get("cat")
            if dur is None or cat is None or cat == "Trace" or ts is None:
                args = get("args")
                if get("name") == "[memory]" and ts is not None and isinstance(args, dict):
                    lists = cols.lists
                    lists["mem_ts"].append(ts)
                    lists["mem_device_type"].append(as_int(args.get("Device Type"), -1))
                    lists["mem_total_allocated"].append(as_float(args.get("Total Allocated"), nan))
                return
            if type(dur) is not int:
                if type(dur) is not float:
                    dur = as_float(dur, nan)
                elif not isfinite(dur) and not field:
                    field = "dur"
            if field:  # every analysis would turn it into NaN sums or an endless span
                raise non_finite(path, position, get("name"), field, ev[field])
            args = get("args")
            aget = args.get if type(args) is dict else _NO_ARGS.get
            ext = aget("External id")
            row = (
                position,
                ids[cat],
                ids[get("name")],
                ids[get("pid")],
                ids[get("tid")],
                ts,
                dur,
                as_int(aget("stream"), -1),
                as_int(aget("correlation"), -1),
                as_float(aget("memory bandwidth (GB/s)"), 0.0),
                as_float(aget("blocks per SM"), nan),
                as_int(aget("bytes"), -1),
                as_int(aget("external id") if ext is None else ext, -1),
            )
            for append, value in zip(appends, row, strict=True):
                append(value)
        except (TypeError, ValueError, OverflowError) as exc:
            raise CorruptTraceError(
                f"{path}: not a Kineto trace: traceEvents[{position}] is malformed "
                f"({type(exc).__name__}: {exc}): {ev!r:.120}"
            ) from exc

    return add


def non_finite(path: object, position: int, name: object, field: str, value: object) -> TraceError:
    """The refusal of an event whose `ts` or `dur` is NaN or an infinity."""
    return NonFiniteTraceError(
        f"{path}: traceEvents[{position}] ({name!r:.60}) has {field} = {value!r}: "
        "a timestamp or duration must be a finite number"
    )
