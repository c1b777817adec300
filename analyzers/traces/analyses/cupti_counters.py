"""CUPTI counters: whether the trace holds per-kernel hardware counters (CUPTI profiler mode,
events of category `cuda_profiler_range`), and how many kernels carry them.

HTA 0.5.0's `get_cupti_counter_data_with_operators()` pairs the n-th `cuda_profiler_range` kernel
with the n-th `cudaLaunchKernel` (in time order; a count mismatch is an error), then names each
kernel's CPU op stack and counters. Every shared trace lacks the category (HTA returns nothing; a
note here). Where counters exist, this reports the pairing HTA would make, not the values.
"""

from __future__ import annotations

import re

import numpy as np

from analyzers.traces.analyses.base import RankRows, TraceOptions, analysis, rank_by_rank
from analyzers.traces.frame import RankFrame

PLUGIN_ORDER = 179  # after the counter tracks
PROFILER_CAT = "cuda_profiler_range"
_LAUNCH = re.compile(r"cudaLaunchKernel")


@analysis(
    "cupti_counters",
    "CUPTI hardware counters",
    "get_cupti_counter_data_with_operators",
    "says when a trace has no counters; counter values are not loaded",
)
@rank_by_rank("cupti_counters", ("rank", "profiled_kernels", "launches", "paired"))
def cupti_counters(frame: RankFrame, options: TraceOptions) -> RankRows:
    kernels = int(frame.cat_in(frozenset({PROFILER_CAT})).sum())
    if not kernels:
        return RankRows(
            note=f"no CUPTI counters (no {PROFILER_CAT} events: the trace was not recorded in "
            "CUPTI profiler mode)"
        )
    runtime = frame.cat_in(frozenset({"cuda_runtime"}))
    launches = int(np.sum(runtime & frame.names_matching(_LAUNCH.match)))
    unpaired = f"{kernels} profiled kernels but {launches} launches: HTA cannot pair them"
    note = "" if kernels == launches else unpaired
    return RankRows([(frame.rank, kernels, launches, kernels == launches)], note=note)
