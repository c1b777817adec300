"""Pageable memory copies (rule T6); HTA only shows them inside its MEMORY share.

A host<->device copy from or to pageable memory (Kineto: `Memcpy HtoD (Pageable -> Device)`,
`Memcpy DtoH (Device -> Pageable)`) is staged through a pinned buffer: a fraction of PCIe
bandwidth, and it blocks the launching CPU call (Nsight Systems' `cuda_memcpy_async` rule).
Reported per direction: copies, bytes, GPU time, CPU time of the launching calls, effective
bandwidth. Fix: `pin_memory=True` in the DataLoader and `.to(device, non_blocking=True)`.
"""

from __future__ import annotations

import numpy as np

from analyzers.traces.analyses.base import RankRows, TraceOptions, analysis, rank_by_rank
from analyzers.traces.frame import RankFrame

PLUGIN_ORDER = 120  # its place in the trace report (fleetscope.plugins)


def is_pageable(name: str) -> bool:
    return name.startswith("Memcpy") and "Pageable" in name


@analysis("pageable_memcpy", "Pageable memory copies", None, "HTA has none")
@rank_by_rank(
    "pageable_memcpy", ("rank", "name", "copies", "bytes", "gpu_us", "launch_cpu_us", "gbps")
)
def pageable_memcpy(frame: RankFrame, options: TraceOptions) -> RankRows:
    sel = np.flatnonzero(frame.names_matching(is_pageable) & frame.on_stream)
    launches = frame.linked_rows(sel)
    found = []
    for name_id in np.unique(frame.name[sel]).tolist():
        m, launch = sel[frame.name[sel] == name_id], launches[frame.name[sel] == name_id]
        cpu_us = float(frame.dur[launch[launch >= 0]].sum())
        gpu_us = float(frame.dur[m].sum())
        nbytes = float(np.clip(frame.bytes[m], 0, None).sum())
        gbps = nbytes / gpu_us / 1e3 if gpu_us > 0 else float("nan")
        found.append((frame.rank, frame.texts[name_id], len(m), nbytes, gpu_us, cpu_us, gbps))
    keys = {"copies": 2, "gpu_us": 4, "cpu_us": 5, "bytes": 3}
    return RankRows(found, {k: float(sum(row[i] for row in found)) for k, i in keys.items()})
