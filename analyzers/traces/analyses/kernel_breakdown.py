"""GPU kernel breakdown: time by kernel class with overlaps, and per-kernel statistics.

Kernel-type table (HTA 0.5.0 `get_gpu_kernel_breakdown`, trace-semantics.md section 5): per rank,
the unions of COMPUTATION, COMMUNICATION and MEMORY rows (`stream != -1`) are swept with a
bitmask; each maximal interval adds its length to a label such as "COMPUTATION overlapping
COMMUNICATION"; sums are added across ranks; percentage = round(100 * sum / total, 1).
Zero-length labels (HTA's tie artefacts) are left out.

Per-kernel table: per rank and class, group by full name: sum/max/min/mean/std of durations
(std: pandas' Welford, NaN -> 0), sorted by sum descending (HTA's unstable sort). With more than
`num_kernels` names, rows past the 0.8 quantile of the cumulative sum or at position >= 10 become
"others" and everything is regrouped on the per-name sums (so a named kernel's max/min/mean all
equal its sum).
"""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise
from typing import Any

import numpy as np

from analyzers.traces.analyses.base import AnalysisResult, Table, TraceOptions, analysis, gpu_busy
from analyzers.traces.classify import KernelClass
from analyzers.traces.frame import F64, I64, RankFrame, TraceSet
from analyzers.traces.stats import group_std, hta_round, unstable_argsort

PLUGIN_ORDER = 30  # its place in the trace report (fleetscope.plugins)
TYPES = (KernelClass.COMPUTATION, KernelClass.COMMUNICATION, KernelClass.MEMORY)
TYPE_COLUMNS = ("kernel_type", "sum", "percentage")
NAME_COLUMNS = ("name", "sum (us)", "max (us)", "min (us)", "stddev", "mean (us)")
KERNEL_COLUMNS = (*NAME_COLUMNS, "kernel_type", "rank")


def overlap_label_sums(frame: RankFrame) -> dict[str, float]:
    """Length of each class-overlap label on one rank (bit 1 COMP, 2 COMM, 4 MEM)."""
    busy = [gpu_busy(frame, kind) for kind in TYPES]  # starts then ends, +bit then -bit
    t = np.concatenate([times for pair in busy for times in pair])
    if not len(t):
        return {}
    delta = np.concatenate(
        [np.repeat([1 << b, -(1 << b)], len(s)) for b, (s, _) in enumerate(busy)]
    )
    order = np.argsort(t, kind="stable")
    t = t[order]
    running = np.cumsum(delta[order])
    seg = np.trunc(np.diff(t))  # HTA: (next_time - time).astype(int)
    out = {}
    for mask in np.unique(running[:-1]).tolist():
        length = float(seg[running[:-1] == mask].sum())
        if mask > 0 and length:
            label = " overlapping ".join(k.name for b, k in enumerate(TYPES) if mask & (1 << b))
            out[label] = length
    return out


def aggregate_by_name(
    frame: RankFrame, rows: np.ndarray, num_kernels: int, duration_ratio: float
) -> list[tuple[str, float, float, float, float, float]]:
    """HTA `_aggr_gpu_kernel_time` of `rows`: (name, sum, max, min, std, mean) per name, by name."""
    codes, of_row = np.unique(frame.name[rows], return_inverse=True)
    groups = _by_name([frame.names[c] for c in codes.tolist()], of_row, frame.dur[rows])
    # Within `num_kernels` names all stay named and both callers sort by name: HTA's ranking
    # (its unstable sort) matters only where tied sums straddle the cut into "others".
    if len(groups) > num_kernels:
        names, sums = list(groups), np.array([v.sum() for v in groups.values()])
        order = unstable_argsort(sums, descending=True)
        cumsum = np.cumsum(sums[order])
        threshold = np.percentile(cumsum, duration_ratio * 100.0)
        others = (cumsum > threshold) | (np.arange(len(order)) >= num_kernels)
        named = ["others" if o else names[i] for i, o in zip(order, others.tolist(), strict=True)]
        groups = _by_name(named, np.arange(len(named)), sums[order])
    stats = [(name, float(v.sum()), v) for name, v in groups.items()]
    return [(n, s, float(v.max()), float(v.min()), group_std(v), s / len(v)) for n, s, v in stats]


def _by_name(texts: list[str], of_row: I64, values: F64) -> dict[str, F64]:
    """`values` grouped by `texts[of_row]` (each group in row order), by name."""
    keys = sorted(set(texts))
    at = {text: i for i, text in enumerate(keys)}
    group = np.array([at[text] for text in texts], dtype=np.int64)[of_row]
    order = np.argsort(group, kind="stable")
    bounds = np.searchsorted(group[order], np.arange(len(keys) + 1)).tolist()
    return {key: values[order[b0:b1]] for key, (b0, b1) in zip(keys, pairwise(bounds), strict=True)}


@analysis(
    "kernel_breakdown",
    "GPU kernel breakdown by class, with overlaps, and top kernels per class",
    "get_gpu_kernel_breakdown",
    "custom collectives (DeepEP, NVSHMEM, all-to-all) counted as communication",
)
def kernel_breakdown(trace: TraceSet, options: TraceOptions) -> AnalysisResult:
    label_sums: dict[str, float] = defaultdict(float)
    kernel_rows: list[tuple[Any, ...]] = []
    per_rank: dict[int, dict[str, float]] = {}
    for frame in trace.frames():
        labels = overlap_label_sums(frame)
        for label, value in labels.items():
            label_sums[label] += value
        per_rank[frame.rank] = {f"{k}_us": v for k, v in labels.items()}
        for kind in TYPES:
            sel = np.flatnonzero(frame.of_class(kind))
            found = aggregate_by_name(frame, sel, options.num_kernels, options.duration_ratio)
            kernel_rows += [(*row, kind.name, frame.rank) for row in found]
    kernel_rows.sort(key=lambda r: (r[6], r[0], r[7]))
    items, grand = list(label_sums.items()), sum(label_sums.values())
    ranked = [items[i] for i in unstable_argsort(np.array([v for _, v in items]), descending=True)]
    type_rows = tuple((k, v, hta_round(v / grand * 100, 1)) for k, v in ranked)
    type_table = Table("gpu_kernel_breakdown_kernel_type", TYPE_COLUMNS, type_rows)
    kernels = Table("gpu_kernel_breakdown_all_kernels", KERNEL_COLUMNS, tuple(kernel_rows))
    return AnalysisResult("kernel_breakdown", (type_table, kernels), per_rank)
