"""GPU starvation gaps (rule T4), after Nsight Systems' `gpu_gaps` expert rule.

Algorithm: the union of all GPU rows (every stream) per rank; a gap is the time between two
consecutive busy intervals; gaps longer than the threshold (Nsight's default 500 ms) are
reported, excluding before the first and after the last GPU activity (as Nsight does). For each,
the CPU operations that overlap it most (what the host was doing) are named.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from analyzers.traces.analyses.base import RankRows, TraceOptions, analysis, gpu_busy, rank_by_rank
from analyzers.traces.frame import CPU_OP_CATS, RankFrame

PLUGIN_ORDER = 130  # its place in the trace report (fleetscope.plugins)


def _busiest_cpu_ops(frame: RankFrame, start: float, end: float) -> str:
    cpu = frame.cat_in(CPU_OP_CATS | {"user_annotation", "python_function"}) & (frame.stream == -1)
    sel = np.flatnonzero(cpu & (frame.ts < end) & (frame.end > start))
    overlap: dict[str, float] = defaultdict(float)
    for row in sel.tolist():
        name = frame.texts[frame.name[row]]
        if name.startswith("ProfilerStep#"):
            continue
        overlap[name] += min(end, frame.end[row]) - max(start, frame.ts[row])
    best = sorted(overlap.items(), key=lambda kv: -kv[1])[:3]
    return "; ".join(f"{name} ({us / 1e3:.1f} ms)" for name, us in best)


@analysis("gpu_gaps", "GPU starvation gaps (Nsight gpu_gaps)", None, "HTA has none")
@rank_by_rank("gpu_gaps", ("rank", "start_us", "end_us", "gap_us", "cpu_busy_with"))
def gpu_gaps(frame: RankFrame, options: TraceOptions) -> RankRows:
    starts, ends = gpu_busy(frame)
    gap = starts[1:] - ends[:-1]
    long = np.flatnonzero(gap > options.gpu_gap_threshold_us)
    spans = [(float(ends[i]), float(starts[i + 1])) for i in long.tolist()]
    rows = [(frame.rank, g0, g1, g1 - g0, _busiest_cpu_ops(frame, g0, g1)) for g0, g1 in spans]
    values = {
        "gaps": float(len(long)),
        "gap_us": float(gap[long].sum()),
        "longest_gap_us": float(gap.max()) if len(gap) else 0.0,
    }
    return RankRows(rows, values)
