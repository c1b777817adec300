"""Data-loader share of each training step (rules T8 and P1); HTA has no such analysis.

Algorithm: the time of `enumerate(DataLoader)#...__next__` rows (what the TensorBoard plugin's
"DataLoader" category counts) is unioned and intersected with each `ProfilerStep#N` range; share
= that time / step duration, the rank's over all steps (without steps: over the trace's CPU span,
and said so). Thresholds (rules.md): > 5 % is a data-loader stall (TB plugin, T1/T8), >= 20 %
"highly input-bound" (TF profiler input-pipeline analysis).
"""

from __future__ import annotations

import math

from analyzers.traces.analyses.base import RankRows, TraceOptions, analysis, rank_by_rank
from analyzers.traces.analyses.steps import steps_or_span
from analyzers.traces.frame import RankFrame
from analyzers.traces.stats import union_intervals, window_intersections

PLUGIN_ORDER = 100  # its place in the trace report (fleetscope.plugins)


def is_dataloader(name: str) -> bool:
    return name.startswith("enumerate(DataLoader)")


@analysis(
    "dataloader",
    "Data-loader share of each step",
    None,
    "HTA has none (its critical path can only mark data-load events)",
)
@rank_by_rank("dataloader_share", ("rank", "step", "step_us", "dataloader_us", "share"))
def dataloader(frame: RankFrame, options: TraceOptions) -> RankRows:
    sel = frame.names_matching(is_dataloader) & (frame.stream == -1)
    d_start, d_end = union_intervals(frame.ts[sel], frame.end[sel])
    found = steps_or_span(frame)
    waits = window_intersections([(s.start_us, s.end_us) for s in found], d_start, d_end)
    rows = []
    for step, wait in zip(found, waits, strict=True):
        share = wait / step.duration_us if step.duration_us > 0 else math.nan
        rows.append((frame.rank, step.number, step.duration_us, wait, share))
    wait_total, step_total = sum(waits, 0.0), sum((s.duration_us for s in found), 0.0)
    values = {
        "dataloader_us": wait_total,
        "step_us": step_total,
        "share": wait_total / step_total if step_total else math.nan,
        "calls": float(sel.sum()),
    }
    note = "no ProfilerStep ranges; share of the whole trace"
    return RankRows(rows, values, note if found and found[0].number == -1 else "")
