"""Parse one PyTorch profiler (Kineto) trace file into numpy columns, 1 MiB at a time
(`load_fast.py`): the peak is the columns plus a chunk (HTA's `json.load` of the whole document
peaks at 100-450 MiB for a 1-3 MB gzipped trace).

Accepted input: plain or gzip JSON (by magic bytes, not by name); 2021 category names
(`Operator`, `Runtime`, `Kernel`, ...) and current ones (`cpu_op`, `cuda_runtime`, `kernel`, ...);
integer or float-ns timestamps; a missing `distributedInfo` or rank; CPU-only traces. A truncated
file raises `TruncatedTraceError`, any other non-trace `CorruptTraceError`, naming file and fault.

Kept: every event with a `dur` and a `cat` other than `Trace` (HTA's kept set, trace-semantics.md
section 1.4), with its position in `traceEvents` (HTA's `index`), plus `[memory]` instant events
(allocator counters). No analysis rule is applied here (HTA's are `hta_rules.py`); no pandas.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from analyzers.traces import load_fast
from analyzers.traces.columns import CHUNK_SIZE, DTYPES, ColumnBuilder, non_finite
from analyzers.traces.frame import RowColumns


@dataclass(eq=False)
class RawTrace(RowColumns):
    """One trace file (one rank) as columns (`RowColumns`); row i is the i-th kept event."""

    # HTA rounds ns timestamps when pandas would make `ts` a float column: some event has a float
    # `ts` or none at all. `ts` stays an integer column only when every event has a `ts`.
    ts_has_float: bool
    ts_all_present: bool
    event_count: int
    hta_rank: int | None

    @classmethod
    def of_columns(
        cls, path: Path, metadata: dict[str, Any], cols: ColumnBuilder, hta_rank: int | None
    ) -> RawTrace:
        return cls(
            path=path,
            metadata=metadata,
            names=cols.symbols.names,
            ts_has_float=cols.ts_has_float,
            ts_all_present=cols.ts_all_present,
            event_count=cols.count,
            hta_rank=hta_rank,
            **{key: cols.column(key) for key in DTYPES},
        )

    @property
    def distributed_rank(self) -> int | None:
        """`distributedInfo.rank` when the profiler wrote it (it is missing in 2021 traces)."""
        info = self.metadata.get("distributedInfo")
        rank = info.get("rank") if isinstance(info, dict) else None
        return rank if isinstance(rank, int) and not isinstance(rank, bool) else None

    @property
    def rank(self) -> int:
        """The rank fleetscope uses: `distributedInfo.rank`, else HTA's text match, else 0."""
        return next((r for r in (self.distributed_rank, self.hta_rank) if r is not None), 0)


def load_raw_trace(path: str | Path, *, chunk_size: int = CHUNK_SIZE) -> RawTrace:
    """Parse one trace file; `chunk_size` (decompressed bytes per read) is for memory and tests."""
    path = Path(path)
    cols = ColumnBuilder(path)
    metadata, hta_rank = load_fast.decode(path, cols, chunk_size)
    raw = RawTrace.of_columns(path, metadata, cols, hta_rank)
    _refuse_non_finite(raw)
    return raw


def _refuse_non_finite(raw: RawTrace) -> None:
    """Text such as "inf" in `ts` or `dur` (`columns.as_float` reads it) is refused as
    `columns.event_sink` refuses an infinite number (a NaN is text the rules keep as NaN)."""
    infinite = np.isinf(raw.ts) | np.isinf(raw.dur)
    if infinite.any():
        row = int(np.argmax(infinite))
        field = "ts" if np.isinf(raw.ts[row]) else "dur"
        name = raw.names[raw.name[row]] if raw.name[row] >= 0 else None
        value = float(getattr(raw, field)[row])
        raise non_finite(raw.path, int(raw.index[row]), name, field, value)
