"""Time per GPU user annotation (`record_function` ranges as the GPU saw them).

Algorithm (HTA 0.5.0 `get_gpu_user_annotation_breakdown`, trace-semantics.md section 9): rows with
`cat == gpu_user_annotation`, aggregated by name as kernel_breakdown.py's per-kernel table with
`num_kernels = 1000`, sorted by rank and name; no such category: no table (HTA returns None).
"""

from __future__ import annotations

import numpy as np

from analyzers.traces.analyses.base import AnalysisResult, Table, TraceOptions, analysis
from analyzers.traces.analyses.kernel_breakdown import NAME_COLUMNS, aggregate_by_name
from analyzers.traces.frame import TraceSet

PLUGIN_ORDER = 80  # its place in the trace report (fleetscope.plugins)
COLUMNS = (*NAME_COLUMNS, "rank")


@analysis(
    "user_annotation",
    "GPU time per user annotation",
    "get_gpu_user_annotation_breakdown",
    "exact durations",
)
def user_annotation(trace: TraceSet, options: TraceOptions) -> AnalysisResult:
    frames = trace.frames()
    if not any("gpu_user_annotation" in f.symbols for f in frames):
        return AnalysisResult("user_annotation", notes=("no gpu_user_annotation events",))
    rows = []
    for frame in frames:
        sel = np.flatnonzero(frame.cat == frame.sym("gpu_user_annotation"))
        found = aggregate_by_name(frame, sel, 1000, options.duration_ratio)
        rows += [(*row, frame.rank) for row in found]
    rows.sort(key=lambda r: (r[6], r[0]))
    table = Table("gpu_user_annotation_breakdown", COLUMNS, tuple(rows))
    return AnalysisResult("user_annotation", (table,))
