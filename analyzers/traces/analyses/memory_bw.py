"""Memory copy/set bandwidth per kind (Memcpy HtoD, DtoH, DtoD, Memset).

Algorithm (HTA 0.5.0 `get_memory_bw_summary`, trace-semantics.md section 9): MEMORY rows grouped
by the name's first 11 characters (`Memcpy HtoD`) or `Memset`; bandwidth is the trace's own
`args["memory bandwidth (GB/s)"]`; a 0 duration becomes 1; a step function (+bw at start, -bw at
end, HTA's unstable sort, cumulative per kind); `describe()` of the positive change points.
Native mode's effective bandwidth: bytes / union of busy time.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from analyzers.traces.analyses.base import AnalysisResult, Table, TraceOptions, analysis
from analyzers.traces.classify import KernelClass
from analyzers.traces.frame import F64, I64, Mode, RankFrame, TraceSet
from analyzers.traces.stats import DESCRIBE_KEYS, describe, union_intervals, unstable_argsort

PLUGIN_ORDER = 70  # its place in the trace report (fleetscope.plugins)


def memory_kind(name: str) -> str:
    """HTA `get_memory_kernel_type`."""
    if name.startswith("Memset"):
        return "Memset"
    return name[:11] if name.startswith("Memcpy") else "Memcpy Unknown"


def bandwidth_tracks(frame: RankFrame) -> Iterator[tuple[str, I64, F64, F64]]:
    """Per kind, sorted: (kind, the row of each change point, its time, the running sum)."""
    rows = np.flatnonzero(frame.of_class(KernelClass.MEMORY))
    dur = np.where(frame.dur[rows] == 0, 1.0, frame.dur[rows])
    ts = np.concatenate([frame.ts[rows], frame.ts[rows] + dur])
    value = np.concatenate([frame.memory_bw_gbps[rows], -frame.memory_bw_gbps[rows]])
    kinds = np.array([memory_kind(frame.texts[c]) for c in frame.name[rows].tolist()] * 2)
    order = unstable_argsort(frame.sort_key(ts))
    for kind in sorted(set(kinds.tolist())):
        at = order[kinds[order] == kind]
        # sequential from 0.0, as HTA's running sum (add.accumulate is sequential; -0.0 stays 0.0)
        levels = np.cumsum(np.concatenate([[0.0], value[at]]))[1:]
        yield kind, np.concatenate([rows, rows])[at], ts[at], levels


@analysis(
    "memory_bw",
    "Memory copy/set bandwidth",
    "get_memory_bw_summary",
    "bytes, busy time and effective bandwidth per kind instead of count-weighted change points",
)
def memory_bw(trace: TraceSet, options: TraceOptions) -> AnalysisResult:
    native = trace.mode is Mode.NATIVE
    rows = []
    per_rank: dict[int, dict[str, float]] = {}
    for frame in trace.frames():
        if not native:
            for kind, _, _, levels in bandwidth_tracks(frame):
                d = describe(levels[levels > 0])
                if d["count"]:
                    rows.append((frame.rank, kind, *d.values()))
            continue
        sel = np.flatnonzero(frame.of_class(KernelClass.MEMORY))
        kinds = np.array([memory_kind(frame.texts[i]) for i in frame.name[sel].tolist()])
        values: dict[str, float] = {}
        for kind in sorted(set(kinds.tolist())):
            rows_k = sel[kinds == kind]
            starts, ends = union_intervals(frame.ts[rows_k], frame.end[rows_k])
            busy = float(ends.sum() - starts.sum())
            nbytes = float(np.clip(frame.bytes[rows_k], 0, None).sum())
            gbps = nbytes / busy / 1e3 if busy > 0 else float("nan")
            rows.append((frame.rank, kind, len(rows_k), nbytes, busy, gbps))
            values[f"{kind}_us"] = busy
        per_rank[frame.rank] = values
    columns: tuple[str, ...] = (
        ("rank", "name", "count", "bytes", "busy_us", "effective_gbps")
        if native
        else ("rank", "name", *DESCRIBE_KEYS)
    )
    table = Table("memory_bw_summary", columns, tuple(rows))
    return AnalysisResult("memory_bw", (table,), per_rank)
