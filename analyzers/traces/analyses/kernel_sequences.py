"""Frequent CUDA kernel sequences: the kernel sequences an operator launches, how often each
recurs, and their GPU and CPU time (candidates for fusion or CUDA graphs).

Algorithm (HTA 0.5.0 `get_frequent_cuda_kernel_sequences(operator_name, output_dir,
min_pattern_len=3)`, `hta/analyzers/cuda_kernel_analysis.py`):
1. Roots: CPU rows whose name contains `operator_name` that no other such row encloses on their
   thread (pid, tid) and that launch at least `min_pattern_len` GPU ops. (HTA keeps those at the
   rank's smallest call depth: one idle ATen op on a data-loader thread then hides every other.)
2. A root's kernels: the GPU ops linked (`index_correlation`) to the runtime calls inside it on
   its thread (inside two overlapping roots: the later's), in start order. Its pattern is (root
   name, kernel names...).
3. Per pattern: count, total GPU duration of its kernels, total CPU duration of its roots; sorted
   by count (descending), then pattern.
The report runs it with `operator_name = "aten::"` and shows HTA's `top_k` (5) patterns. HTA 0.5.0
raises on every shared real trace but the MI250 one while building its call stacks.
"""

from __future__ import annotations

import numpy as np

from analyzers.traces.analyses.aten_op_kernels import enclosing_ops
from analyzers.traces.analyses.base import RankRows, TraceOptions, analysis, rank_by_rank
from analyzers.traces.frame import I64, RankFrame
from analyzers.traces.stats import time_lexsort

PLUGIN_ORDER = 176  # after the stragglers
DEFAULT_OPERATOR = "aten::"
MIN_PATTERN_LEN = 3  # HTA's min_pattern_len default
TOP_K = 5  # HTA's top_k default
COLUMNS = ("rank", "pattern", "count", "GPU kernel duration (us)", "CPU op duration (us)")


def _outermost(frame: RankFrame, cand: I64) -> I64:
    """The candidates (one thread's, in row order) that no other candidate encloses: in start
    order (longest first), those ending after every earlier one."""
    order = time_lexsort((-frame.end[cand], frame.ts[cand]))
    end = frame.end[cand[order]]
    nested = np.zeros(len(cand), dtype=bool)
    nested[order[1:]] = np.maximum.accumulate(end)[:-1] >= end[1:]
    return cand[~nested]


def frequent_kernel_sequences(
    frame: RankFrame, operator_name: str, min_pattern_len: int = MIN_PATTERN_LEN
) -> list[tuple[str, int, float, float]]:
    """(pattern joined by `|`, count, GPU us, CPU us) per pattern, most frequent first."""
    hits = np.flatnonzero(frame.names_matching(lambda name: operator_name in name))
    hits = hits[frame.stream[hits] == -1]
    launch_cpu = np.flatnonzero((frame.stream == -1) & (frame.index_correlation > 0))
    launch_gpu = frame.linked_rows(launch_cpu)  # each CPU row that launched a GPU op, and its op
    keep = (launch_gpu >= 0) & (frame.stream[np.maximum(launch_gpu, 0)] != -1)
    launch_cpu, launch_gpu = launch_cpu[keep], launch_gpu[keep]
    thread = frame.pid.astype(np.int64) * (1 << 32) + frame.tid
    counts: dict[str, list[float]] = {}
    for key in np.unique(thread[hits]).tolist():
        cand = _outermost(frame, hits[thread[hits] == key])
        mine = np.flatnonzero(thread[launch_cpu] == key)
        mine = mine[np.argsort(frame.ts[launch_cpu[mine]], kind="stable")]
        cpu = launch_cpu[mine]
        # Each launch's root (the latest starting that encloses it); kernels by root, then start.
        by_start = np.argsort(frame.ts[cand], kind="stable")
        roots = cand[by_start]
        at = enclosing_ops(frame.ts[roots], frame.end[roots], frame.ts[cpu], frame.end[cpu])
        owner, gpu = by_start[at[at >= 0]], launch_gpu[mine][at >= 0]
        order = np.lexsort((frame.ts[gpu], owner))
        owner, gpu = owner[order], gpu[order]
        bounds = np.searchsorted(owner, np.arange(len(cand) + 1))
        # Only roots with a pattern's length of kernels count (most hold fewer: no slice for them).
        for i in np.flatnonzero(np.diff(bounds) >= min_pattern_len).tolist():
            row, kernels = int(cand[i]), gpu[bounds[i] : bounds[i + 1]]
            names = [frame.texts[c] for c in frame.name[[row, *kernels.tolist()]].tolist()]
            entry = counts.setdefault("|".join(names), [0, 0.0, 0.0])
            entry[0] += 1
            entry[1] += float(frame.dur[kernels].sum())
            entry[2] += float(frame.dur[row])
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1][0], kv[0]))
    return [(p, int(v[0]), v[1], v[2]) for p, v in ordered]


@analysis(
    "kernel_sequences",
    "Frequent kernel sequences of the outermost ATen ops",
    "get_frequent_cuda_kernel_sequences",
    "answers where HTA 0.5.0 raises (its call stacks fail on every shared real trace)",
)
@rank_by_rank("frequent_kernel_sequences", COLUMNS)
def kernel_sequences(frame: RankFrame, options: TraceOptions) -> RankRows:
    found = frequent_kernel_sequences(frame, DEFAULT_OPERATOR)
    return RankRows([(frame.rank, *p) for p in found[:TOP_K]], {"patterns": float(len(found))})
