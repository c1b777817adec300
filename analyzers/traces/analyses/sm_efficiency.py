"""Est. SM efficiency and the grids smaller than the GPU (rule T13), after the TensorBoard
plugin's "Est. SM Efficiency" (`gpu_metrics_parser.py`); HTA has none.

Kineto writes each kernel's `blocks per SM`: its grid's blocks / the GPU's SMs; below 1 the other
SMs idle while it runs. Over the rank's computation kernels with a positive value (the plugin
skips the rest; NCCL launches one block per channel by design): `sm_efficiency` is the
duration-weighted mean of min(blocks per SM, 1), `underfilled_us` the time of kernels below 1,
`idle_sm_us` the sum of dur * (1 - min(blocks per SM, 1)) in whole-GPU us. `underfilled_kernels`:
the kernels below 1 by name (calls, time, mean blocks per launch, idle_sm_us), most idle first.
The plugin divides by the steps' span instead (idle GPU time is T1's) and merges concurrent
kernels. AMD traces record no blocks per SM: a note.
"""

from __future__ import annotations

import math

import numpy as np

from analyzers.traces.analyses.base import RankRows, TraceOptions, analysis, rank_by_rank
from analyzers.traces.classify import KernelClass
from analyzers.traces.frame import RankFrame
from analyzers.traces.hardware import gpu_of

PLUGIN_ORDER = 155  # its place in the trace report (fleetscope.plugins): after tensor_cores
KEYS = ("kernels", "kernel_us", "sm_count", "sm_efficiency", "underfilled_us", "idle_sm_us")
KERNEL_COLUMNS = ("rank", "name", "calls", "total_us", "mean_blocks", "idle_sm_us")


@analysis("sm_efficiency", "Est. SM efficiency (grids smaller than the GPU)", None, "HTA has none")
@rank_by_rank("sm_efficiency", ("rank", *KEYS), ("underfilled_kernels", KERNEL_COLUMNS))
def sm_efficiency(frame: RankFrame, options: TraceOptions) -> RankRows:
    rows = np.flatnonzero(frame.of_class(KernelClass.COMPUTATION) & (frame.blocks_per_sm > 0))
    if not len(rows):
        return RankRows(note="no computation kernel records `blocks per SM`")
    dur, bps = frame.dur[rows], frame.blocks_per_sm[rows]
    used = np.minimum(bps, 1.0)
    idle, under = dur * (1.0 - used), bps < 1
    kernel_us = float(dur.sum())
    sms = gpu_of(frame.device_properties).sm_count or math.nan
    efficiency = float((dur * used).sum()) / kernel_us if kernel_us > 0 else math.nan
    values = (len(rows), kernel_us, sms, efficiency, float(dur[under].sum()), float(idle.sum()))
    codes, inverse = np.unique(frame.name[rows[under]], return_inverse=True)
    calls, total, blocks, idle_by = (
        np.bincount(inverse, weights).tolist()
        for weights in (None, dur[under], bps[under], idle[under])
    )
    kernels = []
    for k in np.argsort(-np.array(idle_by), kind="stable")[: options.top_kernels].tolist():
        stats = (int(calls[k]), total[k], blocks[k] / calls[k] * sms, idle_by[k])
        kernels.append((frame.rank, frame.texts[codes[k]], *stats))
    summary = dict(zip(KEYS, map(float, values), strict=True))
    return RankRows([(frame.rank, *summary.values())], summary, more_rows=kernels)
