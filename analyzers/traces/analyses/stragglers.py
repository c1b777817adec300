"""Potential stragglers: the ranks whose last long collective starts latest, step after step.

Algorithm (HTA 0.5.0 `get_potential_stragglers()` with its defaults, `hta/analyzers/straggler.py`
`find_stragglers_with_late_start_comm_kernels`, 2 candidates):
1. Rows of every rank with an iteration (trace_diff.row_iterations).
2. `t_min` is their earliest start, `mean_iter_time` = (latest end - t_min) / iterations; long
   communication kernels are GPU rows (`stream > 0`, iteration > 0) named `ncclKernel*` lasting at
   least 1 % of `mean_iter_time`.
3. The last such kernel per (rank, stream, iteration, name); per (stream, iteration, name) the
   standard deviation (ddof 1) of its duration over ranks, averaged over iterations; the
   (stream, name) with the largest average is the candidate kernel.
4. Per iteration, ranks whose candidate starts at or after the 2nd latest start count once; the
   ranks with the most counts (2) are the potential stragglers.

HTA raises when no kernel qualifies or with one rank (every shared real trace): a note here. Its
metric can name a punctual rank, one waiting in longer collectives (straggler_set.py in tests).
"""

from __future__ import annotations

import math
import re

import numpy as np

from analyzers.traces.analyses.base import AnalysisResult, Table, TraceOptions, analysis
from analyzers.traces.analyses.trace_diff import row_iterations
from analyzers.traces.classify import KernelClass
from analyzers.traces.frame import Mode, TraceSet

PLUGIN_ORDER = 175  # after the what-if
CANDIDATES = 2  # HTA's num_candidates default
MIN_NORMALIZED_DURATION = 0.01  # HTA's min_normalized_duration: 1 % of the mean iteration
_NCCL = re.compile("ncclKernel")


def _candidates(trace: TraceSet, native: bool) -> tuple[list[tuple[int, int, float]], str]:
    """(rank, iteration, normalized start) of the candidate kernel, or ([], why not)."""
    frames = trace.frames()
    iters = {f.rank: row_iterations(f) for f in frames}
    spans = [(f.ts[u].min(), f.end[u].max()) for f in frames if (u := iters[f.rank] >= 0).any()]
    if not spans:
        return [], "no ProfilerStep iterations"
    present = {i for it in iters.values() for i in np.unique(it[it >= 0]).tolist()}
    t_min = float(min(start for start, _ in spans))
    mean_iter = (float(max(end for _, end in spans)) - t_min) / max(1, len(present))
    last: dict[tuple[int, int, int, str], tuple[float, float]] = {}
    for f in frames:
        it, cut = iters[f.rank], mean_iter * MIN_NORMALIZED_DURATION
        comm = f.of_class(KernelClass.COMMUNICATION) if native else f.names_matching(_NCCL.match)
        long = (f.stream > 0) & (it > 0) & (f.dur >= cut) & comm
        for row in np.flatnonzero(long).tolist():
            key = (f.rank, int(f.stream[row]), int(it[row]), f.texts[f.name[row]])
            last[key] = ((f.ts[row] - t_min) / mean_iter, f.dur[row] / mean_iter)
    if not last:
        return [], "no long communication kernels"
    spread: dict[tuple[int, str], list[float]] = {}
    by_group: dict[tuple[int, int, str], list[float]] = {}
    for (_, stream, iteration, name), (_, duration) in last.items():
        by_group.setdefault((stream, iteration, name), []).append(duration)
    for (stream, _, name), durations in sorted(by_group.items()):
        std = float(np.std(durations, ddof=1)) if len(durations) > 1 else math.nan
        spread.setdefault((stream, name), []).append(std)
    means = {k: float(np.nanmean(v)) for k, v in spread.items() if not np.isnan(v).all()}
    if not means:
        return [], "one rank: no spread of kernel durations across ranks"
    stream, name = max(sorted(means), key=lambda k: means[k])
    picked = [
        (rank, iteration, start)
        for (rank, s, iteration, n), (start, _) in last.items()
        if s == stream and n == name
    ]
    return picked, ""


def straggler_counts(picked: list[tuple[int, int, float]]) -> dict[int, int]:
    """Per rank, the iterations it was among the `CANDIDATES` latest starts in (ties count)."""
    counts = {rank: 0 for rank, _, _ in picked}
    for it in sorted({it for _, it, _ in picked}):
        group = [(rank, start) for rank, i, start in picked if i == it]
        threshold = sorted((start for _, start in group), reverse=True)[:CANDIDATES][-1]
        for rank, start in group:
            counts[rank] += int(start >= threshold)
    return counts


@analysis(
    "stragglers",
    "Potential stragglers",
    "get_potential_stragglers",
    "non-NCCL collectives (RCCL, HCCL, DeepEP) count as communication",
)
def stragglers(trace: TraceSet, options: TraceOptions) -> AnalysisResult:
    picked, why = _candidates(trace, trace.mode is Mode.NATIVE)
    if not picked:
        return AnalysisResult("stragglers", notes=(f"no straggler analysis: {why}",))
    counts = straggler_counts(picked)
    ranked = sorted(counts, key=lambda r: (-counts[r], r))[:CANDIDATES]
    rows = tuple((rank, counts[rank], rank in ranked) for rank in sorted(counts))
    per_rank = {rank: {"straggler_count": float(counts[rank])} for rank in counts}
    table = Table("potential_stragglers", ("rank", "straggler_count", "potential_straggler"), rows)
    note = f"potential stragglers: ranks {sorted(ranked)}"
    return AnalysisResult("stragglers", (table,), per_rank, (note,))
