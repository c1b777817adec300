"""Idle time per stream, by cause (rule T1): host wait, kernel wait, other.

Algorithm (HTA 0.5.0 `get_idle_time_breakdown`, trace-semantics.md section 4), per rank and
stream, over kernel/memcpy/memset rows sorted by start (HTA's unstable sort): `gap = start -
previous row's end` (not a running max; it can be <= 0); `host_wait` when the kernel's launching
runtime call started after the previous kernel ended (the CPU was late); else `kernel_wait` when
`gap < consecutive_kernel_delay` (30 us: launch overhead); else `other`. Sums and ratios are
rounded to 2 decimals; a stream's first kernel counts in `other` as 0. Interval stats: pandas'
`describe()` of the gaps per category. Per stream, unlike the temporal breakdown's idle.
"""

from __future__ import annotations

import numpy as np

from analyzers.traces.analyses.base import RankRows, TraceOptions, analysis, rank_by_rank
from analyzers.traces.frame import RankFrame
from analyzers.traces.stats import DESCRIBE_KEYS, describe, unstable_argsort

PLUGIN_ORDER = 20  # its place in the trace report (fleetscope.plugins)
CATEGORIES = ("host_wait", "kernel_wait", "other")
COLUMNS = ("rank", "stream", "idle_category", "idle_time", "idle_time_ratio")
STATS_COLUMNS = ("idle_category", "rank", "stream", *DESCRIBE_KEYS)


@analysis(
    "idle_time",
    "Idle time per stream by cause (host wait / kernel wait / other)",
    "get_idle_time_breakdown",
    "exact timestamps; launches linked through runtime/driver calls only",
)
@rank_by_rank("idle_time_breakdown", COLUMNS, ("idle_time_interval_stats", STATS_COLUMNS))
def idle_time(frame: RankFrame, options: TraceOptions) -> RankRows:
    kernels = np.flatnonzero(frame.gpu_op)
    if not len(kernels):
        return RankRows(note="no kernels, no idle-time breakdown")
    runtime_row = frame.linked_rows(kernels)
    ts_runtime = np.where(runtime_row >= 0, frame.ts[runtime_row], np.nan)
    streams = frame.stream[kernels]
    totals = dict.fromkeys(CATEGORIES, 0.0)
    rows, stats_rows = [], []
    for stream in dict.fromkeys(streams.tolist()):  # in order of first appearance
        sel = np.flatnonzero(streams == stream)
        sel = sel[unstable_argsort(frame.sort_key(frame.ts[kernels[sel]]))]
        ts, end = frame.ts[kernels[sel]], frame.end[kernels[sel]]
        prev_end = np.concatenate([[np.nan], end[:-1]])
        gap = ts - prev_end
        short = gap < options.consecutive_kernel_delay_us
        category = np.where(ts_runtime[sel] > prev_end, 0, np.where(short, 1, 2))
        sums = {c: float(np.nansum(gap[category == c])) for c in sorted(set(category.tolist()))}
        total = sum(sums.values())
        for c, value in sums.items():
            name, ratio = CATEGORIES[c], value / total if total else np.nan
            r = np.round([value, ratio, *describe(gap[category == c]).values()], 2).tolist()
            rows.append((frame.rank, stream, name, *r[:2]))
            stats_rows.append((name, frame.rank, stream, *r[2:]))
            totals[name] += value
    return RankRows(rows, {f"{k}_us": v for k, v in totals.items()}, more_rows=stats_rows)
