"""Launch queue length per stream, and time blocked on a full queue (rule T3).

Algorithm (HTA 0.5.0 `TraceCounters`, trace-semantics.md section 8): each runtime launch
(`RUNTIME_LAUNCHES`, with a linked GPU op) adds +1 at the call's start on the stream of its GPU
op; each GPU op whose correlation is launched adds -1 at its start; change points are sorted by
time (HTA's unstable sort) and summed per stream. `queue_length_summary` is `describe()` over
change points (count-weighted, not time-weighted). Blocked time: per stream, the time until the
next change point summed where the queue is >= 1024, over the rank's span; HTA keeps only the
last stream of a rank (its bug, reproduced in HTA mode).

Native mode adds the time-weighted mean queue length (what a reader means by "average queue")
and reports every stream's blocked time.
"""

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from analyzers.traces.analyses.base import AnalysisResult, Table, TraceOptions, analysis
from analyzers.traces.analyses.launch_stats import NATIVE_LAUNCHES
from analyzers.traces.frame import F64, I64, Mask, Mode, RankFrame, TraceSet
from analyzers.traces.stats import DESCRIBE_KEYS, describe, unstable_argsort

PLUGIN_ORDER = 60  # its place in the trace report (fleetscope.plugins)
# HTA's TraceCounters launches: native mode's without the two HTA 0.5.0 does not know.
RUNTIME_LAUNCHES = NATIVE_LAUNCHES - {"cuLaunchKernelEx", "hipModuleLaunchKernel"}
BLOCKED_COLUMNS = (
    "rank",
    "stream",
    "duration_at_max_queue_length",
    "relative_duration_at_max_queue_length",
)


def launch_changes(frame: RankFrame, launches: "Mask | None" = None) -> tuple[I64, I64, list[int]]:
    """HTA's `TraceCounters` change points over the whole rank, unsorted: (row, the GPU op whose
    stream it counts on, +1 or -1). A launch (a row of `launches`, by default those named one of
    RUNTIME_LAUNCHES) counts +1 on the stream of the first GPU op with its correlation; a GPU op
    whose correlation some launch has counts -1."""
    gpu = np.flatnonzero(frame.stream != -1)
    gpu_corr = frame.correlation[gpu]
    corrs, first = np.unique(gpu_corr, return_index=True)  # each correlation's first GPU op
    runtime = np.flatnonzero(frame.name_in(RUNTIME_LAUNCHES) if launches is None else launches)
    runtime_corr = frame.correlation[runtime]
    at = np.minimum(np.searchsorted(corrs, runtime_corr), max(len(corrs) - 1, 0))
    found = corrs[at] == runtime_corr if len(corrs) else np.zeros(len(runtime), dtype=bool)
    counted = np.isin(gpu_corr, runtime_corr)
    rows = np.concatenate([runtime[found], gpu[counted]]).astype(np.int64)
    ops = np.concatenate([gpu[first[at[found]]], gpu[counted]]).astype(np.int64)
    return rows, ops, [1] * int(found.sum()) + [-1] * int(counted.sum())


def queue_tracks(
    frame: RankFrame, launches: "Mask | None" = None
) -> Iterator[tuple[int, I64, F64, I64]]:
    """Per stream, by stream: (stream, the GPU op of each change point, its time, the queue length
    after it), in HTA's order."""
    r, ops, delta = launch_changes(frame, launches)
    streams = frame.stream[ops]
    order = unstable_argsort(frame.sort_key(frame.ts[r]))
    change = np.array(delta, dtype=np.int64)
    for stream in sorted(set(streams.tolist())):
        at = order[streams[order] == stream]
        yield stream, ops[at], frame.ts[r[at]], np.cumsum(change[at])


@analysis(
    "queue_length",
    "Launch queue length per stream",
    "get_queue_length_summary / get_time_spent_blocked_on_full_queue",
    "time-weighted mean; blocked time for every stream",
)
def queue_length(trace: TraceSet, options: TraceOptions) -> AnalysisResult:
    native = trace.mode is Mode.NATIVE
    names = NATIVE_LAUNCHES if native else RUNTIME_LAUNCHES
    summary_rows = []
    blocked_rows = []
    per_rank: dict[int, dict[str, float]] = {}
    for frame in trace.frames():
        launches = frame.name_in(names) & (frame.index_correlation > 0)
        series = {stream: (ts, level) for stream, _, ts, level in queue_tracks(frame, launches)}
        span = float(frame.ts.max() - frame.ts.min()) if len(frame) else math.nan
        blocked: list[tuple[Any, ...]] = []
        for stream, (ts, length) in series.items():
            d = describe(length)
            row: tuple[Any, ...] = (frame.rank, stream, *(d[k] for k in DESCRIBE_KEYS))
            if native:
                held = np.diff(ts)
                weighted = float((length[:-1] * held).sum() / held.sum()) if held.sum() else 0.0
                row = (*row, weighted)
            summary_rows.append(row)
            dur = np.diff(ts, append=np.nan)
            full = length >= options.max_queue_length
            if full.any():
                total = float(np.nansum(dur[full]))
                blocked.append((frame.rank, stream, total, total / span))
        blocked_rows += blocked if native else blocked[-1:]
        per_rank[frame.rank] = {
            "max_queue_length": max((float(v[1].max()) for v in series.values()), default=0.0),
            "blocked_share": max((row[3] for row in blocked), default=0.0),
        }
    columns = ("rank", "stream", *DESCRIBE_KEYS, *(["time_weighted_mean"] if native else []))
    summary = Table("queue_length_summary", columns, tuple(summary_rows))
    blocked_table = Table("time_spent_blocked_on_full_queue", BLOCKED_COLUMNS, tuple(blocked_rows))
    return AnalysisResult("queue_length", (summary, blocked_table), per_rank)
