"""Launch queue length per stream, and time blocked on a full queue (rule T3).

Algorithm (HTA 0.5.0 `TraceCounters`, trace-semantics.md section 8): each runtime launch
(`RUNTIME_LAUNCHES`, with a linked GPU op) adds +1 at the call's start on the stream of its GPU
op; each GPU op whose correlation is launched adds -1 at its start; change points are sorted by
time (HTA's unstable sort) and summed per stream. `queue_length_summary` is `describe()` over
change points (count-weighted). Blocked time: per stream, the time until the next change point
summed where the queue is >= 1024, over the rank's span; HTA keeps only a rank's last stream (its
bug, reproduced in HTA mode).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from analyzers.traces.analyses.base import AnalysisResult, Table, TraceOptions, analysis
from analyzers.traces.analyses.launch_stats import NATIVE_LAUNCHES
from analyzers.traces.frame import F64, I64, Mode, RankFrame, TraceSet
from analyzers.traces.stats import DESCRIBE_KEYS, describe, join_rows, unstable_argsort

PLUGIN_ORDER = 60  # its place in the trace report (fleetscope.plugins)
# HTA's TraceCounters launches: native mode's without the two HTA 0.5.0 does not know.
RUNTIME_LAUNCHES = NATIVE_LAUNCHES - {"cuLaunchKernelEx", "hipModuleLaunchKernel"}
BLOCKED_COLUMNS = (
    "rank",
    "stream",
    "duration_at_max_queue_length",
    "relative_duration_at_max_queue_length",
)


def launch_changes(
    frame: RankFrame, launches: frozenset[str] = RUNTIME_LAUNCHES
) -> tuple[I64, I64, I64]:
    """HTA's `TraceCounters` change points, unsorted: (row, the GPU op whose stream it counts on,
    +1 or -1). A launch (one of `launches`, `index_correlation > 0`) counts +1 per GPU op with its
    correlation (a CUDA graph's launch, once per kernel: HTA joins on it); one without a GPU op
    stays (op -1), as in HTA's sort; a GPU op whose correlation such a launch has counts -1."""
    gpu = np.flatnonzero(frame.on_stream)
    gpu_corr = frame.correlation[gpu]
    runtime = np.flatnonzero(frame.name_in(launches))
    runtime = runtime[frame.index_correlation[runtime] > 0]
    runtime_corr = frame.correlation[runtime]
    i, j = join_rows(runtime_corr, gpu_corr, left_join=True)
    launched, on_op = runtime[i], np.append(gpu, -1)[j]  # j = -1: no GPU op, op -1
    counted = np.isin(gpu_corr, runtime_corr)
    rows = np.concatenate([launched, gpu[counted]]).astype(np.int64, copy=False)
    ops = np.concatenate([on_op, gpu[counted]]).astype(np.int64, copy=False)
    return rows, ops, np.repeat(np.array([1, -1]), [len(launched), len(rows) - len(launched)])


def queue_tracks(
    frame: RankFrame, launches: frozenset[str] = RUNTIME_LAUNCHES
) -> Iterator[tuple[int, I64, F64, I64]]:
    """Per stream, sorted: (stream, the GPU op of each change point, its time, the length after)."""
    r, ops, delta = launch_changes(frame, launches)
    order = unstable_argsort(frame.sort_key(frame.ts[r]))
    ts, ops, delta = frame.ts[r[order]], ops[order], delta[order]
    streams = np.where(ops >= 0, frame.stream[ops], -1)  # -1: a launch without a GPU op
    for stream in np.unique(streams[streams != -1]).tolist():
        at = streams == stream
        yield stream, ops[at], ts[at], np.cumsum(delta[at])


@analysis(
    "queue_length",
    "Launch queue length per stream",
    "get_queue_length_summary / get_time_spent_blocked_on_full_queue",
    "time-weighted mean; blocked time for every stream",
)
def queue_length(trace: TraceSet, options: TraceOptions) -> AnalysisResult:
    native = trace.mode is Mode.NATIVE
    launches = NATIVE_LAUNCHES if native else RUNTIME_LAUNCHES
    summary_rows = []
    blocked_rows = []
    per_rank: dict[int, dict[str, float]] = {}
    for frame in trace.frames():
        span = float(frame.ts.max() - frame.ts.min()) if len(frame) else math.nan
        blocked: list[tuple[Any, ...]] = []
        peaks = []
        for stream, _, ts, length in queue_tracks(frame, launches):
            row: tuple[Any, ...] = (frame.rank, stream, *describe(length).values())
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
            peaks.append(float(length.max()))
        blocked_rows += blocked if native else blocked[-1:]
        per_rank[frame.rank] = {
            "max_queue_length": max(peaks, default=0.0),
            "blocked_share": max((row[3] for row in blocked), default=0.0),
        }
    columns = ("rank", "stream", *DESCRIBE_KEYS, *(["time_weighted_mean"] if native else []))
    summary = Table("queue_length_summary", columns, tuple(summary_rows))
    blocked_table = Table("time_spent_blocked_on_full_queue", BLOCKED_COLUMNS, tuple(blocked_rows))
    return AnalysisResult("queue_length", (summary, blocked_table), per_rank)
