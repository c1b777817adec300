"""Synchronization calls (rule T7): where the CPU waits for the GPU; HTA has no summary of them.

Counted per name: runtime calls that block the host (device, stream and event synchronization,
synchronous `cudaMemcpy`/`cudaMemset`, their HIP twins) and the PyTorch ops causing most of them
(`SYNC_CAUSES`): calls, total and longest time, share of step time. Nsight Systems'
`cuda_api_sync` rule flags the same calls; fix: no `.item()` in the step, non_blocking copies.
"""

from __future__ import annotations

import math

import numpy as np

from analyzers.traces.analyses.base import RankRows, TraceOptions, analysis, rank_by_rank
from analyzers.traces.analyses.steps import profiler_steps
from analyzers.traces.frame import RankFrame

PLUGIN_ORDER = 110  # its place in the trace report (fleetscope.plugins)
SYNC_CALLS = frozenset(
    [f"{api}{on}Synchronize" for api in ("cuda", "hip") for on in ("Device", "Stream", "Event")]
    + [f"cu{on}Synchronize" for on in ("Ctx", "Stream", "Event")]
    + ["cudaMemcpy", "cudaMemset", "hipMemcpy"]
)
SYNC_CAUSES = frozenset({"aten::item", "aten::_local_scalar_dense", "aten::nonzero"})
COLUMNS = (
    "rank",
    "name",
    "kind",
    "calls",
    "calls_in_steps",
    "time_in_steps_us",
    "longest_us",
    "share_of_steps",
)


@analysis("sync", "Synchronization calls", None, "HTA has none outside critical-path analysis")
@rank_by_rank("sync_calls", COLUMNS)
def sync(frame: RankFrame, options: TraceOptions) -> RankRows:
    calls = np.flatnonzero(frame.name_in(SYNC_CALLS) & (frame.stream == -1))
    causes = np.flatnonzero(frame.name_in(SYNC_CAUSES) & (frame.stream == -1))
    found = profiler_steps(frame)
    step_us = sum(s.duration_us for s in found)
    in_steps = np.zeros(len(frame), dtype=bool)
    for s in found:
        in_steps |= (frame.ts >= s.start_us) & (frame.ts < s.end_us)
    hits = np.concatenate([calls, causes])
    rows = []
    for name, code in sorted((frame.texts[c], c) for c in np.unique(frame.name[hits])):
        m = hits[frame.name[hits] == code]
        inside = m[in_steps[m]]
        total = float(frame.dur[inside].sum())
        share = total / step_us if step_us else math.nan
        kind = "cause" if name in SYNC_CAUSES else "sync call"
        longest = float(frame.dur[m].max())
        rows.append((frame.rank, name, kind, len(m), len(inside), total, longest, share))
    waits = calls[in_steps[calls]] if found else calls
    total_wait = float(frame.dur[waits].sum())
    values = {
        "sync_calls": float(len(waits)),
        "sync_us": total_wait,
        "share": total_wait / step_us if step_us else math.nan,
    }
    return RankRows(rows, values)
