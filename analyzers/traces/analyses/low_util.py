"""Low GPU utilization chunks (rule T5), after Nsight Systems' `gpu_time_util` expert rule.

Algorithm (Nsight's defaults): the range from the first to the last GPU activity of a rank is cut
into 30 equal chunks; a chunk's utilization is the union of GPU rows inside it over its length;
chunks below 50 % are reported. Utilization here is "some GPU op runs", not SM occupancy.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np

from analyzers.traces.analyses.base import RankRows, TraceOptions, analysis, gpu_busy, rank_by_rank
from analyzers.traces.frame import RankFrame
from analyzers.traces.stats import window_intersections

PLUGIN_ORDER = 140  # its place in the trace report (fleetscope.plugins)


@analysis("low_util", "Low GPU utilization chunks (Nsight gpu_time_util)", None, "HTA has none")
@rank_by_rank("low_util_chunks", ("rank", "chunk", "start_us", "end_us", "gpu_util_pct"))
def low_util(frame: RankFrame, options: TraceOptions) -> RankRows:
    starts, ends = gpu_busy(frame)
    if not len(starts):
        return RankRows()
    edges = np.linspace(starts[0], ends[-1], options.util_chunks + 1).tolist()
    chunks = [(i, c0, c1) for i, (c0, c1) in enumerate(pairwise(edges)) if c1 > c0]
    busy_us = window_intersections([(c0, c1) for _, c0, c1 in chunks], starts, ends)
    low = []
    for (i, c0, c1), busy in zip(chunks, busy_us, strict=True):
        if (pct := 100.0 * busy / (c1 - c0)) < options.util_threshold_pct:
            low.append((frame.rank, i, c0, c1, pct))
    return RankRows(low, {"low_chunks": float(len(low)), "chunks": float(options.util_chunks)})
