"""Communication/computation overlap (rule T9's second half).

Algorithm (HTA 0.5.0 `get_comm_comp_overlap`, trace-semantics.md section 6), per rank:
`comp_comm_overlap_pctg` = round(100 * |union COMM ∩ union COMP| / |union COMM|, 2), NaN without
communication (memory ops ignored). HTA calls custom collectives (DeepEP, NVSHMEM) compute; native
mode also reports communication's share of GPU busy time.
"""

from __future__ import annotations

import math

from analyzers.traces.analyses.base import RankRows, TraceOptions, analysis, gpu_busy, rank_by_rank
from analyzers.traces.classify import KernelClass
from analyzers.traces.frame import RankFrame
from analyzers.traces.stats import hta_round, intersection_length

PLUGIN_ORDER = 40  # its place in the trace report (fleetscope.plugins)


@analysis(
    "comm_comp_overlap",
    "Communication/computation overlap",
    "get_comm_comp_overlap",
    "custom collectives counted as communication",
)
@rank_by_rank("comm_comp_overlap", ("rank", "comp_comm_overlap_pctg"))
def comm_comp_overlap(frame: RankFrame, options: TraceOptions) -> RankRows:
    c_start, c_end = gpu_busy(frame, KernelClass.COMMUNICATION)
    p_start, p_end = gpu_busy(frame, KernelClass.COMPUTATION)
    comm_us = float(c_end.sum() - c_start.sum())
    both = intersection_length(c_start, c_end, p_start, p_end)
    ratio = both / comm_us if comm_us else math.nan
    b_start, b_end = gpu_busy(frame)
    busy = float(b_end.sum() - b_start.sum())
    values = {
        "communication_us": comm_us,
        "overlapped_us": both,
        "overlap_ratio": ratio,
        "communication_share_of_busy": comm_us / busy if busy else math.nan,
    }
    return RankRows([(frame.rank, hta_round(100 * ratio, 2))], values)
