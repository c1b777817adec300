"""Temporal breakdown: how the GPU's busy span splits into idle, compute and non-compute time.

Algorithm (HTA 0.5.0 `BreakdownAnalysis.get_temporal_breakdown`, trace-semantics.md section 3),
per rank, over G = every row with `stream != -1`: `kernel_time` = max(end) - min(start) of G;
`idle` = kernel_time - |union G|; `compute` = |union of COMPUTATION rows|; `non_compute` =
kernel_time - compute - idle; each `*_pctg` = round(100 * x / kernel_time, 2). The denominator is
the GPU's busy span, not the step. Native mode counts custom collectives as communication.
"""

from __future__ import annotations

from analyzers.traces.analyses.base import RankRows, TraceOptions, analysis, gpu_busy, rank_by_rank
from analyzers.traces.classify import KernelClass
from analyzers.traces.frame import RankFrame
from analyzers.traces.stats import hta_round

PLUGIN_ORDER = 10  # its place in the trace report (fleetscope.plugins)
PARTS = ("idle", "compute", "non_compute")
COLUMNS = (
    "rank",
    *(f"{p}_time(us)" for p in (*PARTS, "kernel")),
    *(f"{p}_time_pctg" for p in PARTS),
)


@analysis(
    "temporal_breakdown",
    "Temporal breakdown (GPU busy span)",
    "get_temporal_breakdown",
    "exact timestamps, all steps; CPU-only ranks reported instead of raising",
)
@rank_by_rank("temporal_breakdown", COLUMNS)
def temporal_breakdown(frame: RankFrame, options: TraceOptions) -> RankRows:
    starts, ends = gpu_busy(frame)
    if not len(starts):
        return RankRows(note="no GPU activity in the trace (CPU-only)")
    kernel_time = float(ends[-1] - starts[0])
    idle = kernel_time - float(ends.sum() - starts.sum())
    c_start, c_end = gpu_busy(frame, KernelClass.COMPUTATION)
    compute = float(c_end.sum() - c_start.sum())
    non_compute = kernel_time - compute - idle
    pct = [hta_round(100 * (x / kernel_time), 2) for x in (idle, compute, non_compute)]
    values = {
        "idle_us": idle,
        "compute_us": compute,
        "non_compute_us": non_compute,
        "kernel_time_us": kernel_time,
        "gpu_busy_us": kernel_time - idle,
        "first_gpu_us": float(starts[0]),
        "last_gpu_us": float(ends[-1]),
    }
    return RankRows([(frame.rank, idle, compute, non_compute, kernel_time, *pct)], values)
