"""Frequent CUDA kernel sequences: the kernel sequences an operator launches, how often each
recurs, and the GPU and CPU time they take (candidates for fusion or CUDA graphs).

Algorithm (HTA 0.5.0 `get_frequent_cuda_kernel_sequences(operator_name, output_dir,
min_pattern_len=3)`, `hta/analyzers/cuda_kernel_analysis.py`):

1. Candidates: CPU rows whose name contains `operator_name`. Roots are the candidates no other
   candidate encloses on their thread (pid, tid) that launch at least `min_pattern_len` GPU ops.
   (HTA keeps the candidates at the rank's smallest call depth, where with `"aten::"` often
   nothing launches: one idle ATen op on a data-loader thread hides every other.)
2. A root's kernels: the GPU ops linked (`index_correlation`) to the runtime calls inside it on
   its thread, in start order. Its pattern is (root name, kernel names...).
3. Per pattern: count, total GPU duration of its kernels, total CPU duration of its roots; sorted
   by count (descending), then pattern.

The report runs it with `operator_name = "aten::"` and shows the top 5 patterns (HTA's `top_k`).
HTA 0.5.0 raises on every shared real trace but the MI250 one (empty table) while building its
call stacks (its goldens, `kernel_sequences.json`, record the errors).
"""

from __future__ import annotations

import numpy as np

from analyzers.traces.analyses.base import AnalysisResult, TraceOptions, analysis
from analyzers.traces.frame import RankFrame, TraceSet
from analyzers.traces.stats import time_lexsort

__all__ = ["frequent_kernel_sequences"]

PLUGIN_ORDER = 176  # after the stragglers
DEFAULT_OPERATOR = "aten::"
MIN_PATTERN_LEN = 3  # HTA's min_pattern_len default
TOP_K = 5  # HTA's top_k default
COLUMNS = ("rank", "pattern", "count", "GPU kernel duration (us)", "CPU op duration (us)")


def _nested_in_candidate(frame: RankFrame, rows: np.ndarray, hit: np.ndarray) -> np.ndarray:
    """Per row (CPU rows of one thread), whether a candidate row encloses it. In start order
    (longest first) a row's parent is the nearest earlier row that ends no earlier; parents, then
    "a candidate among my ancestors", are found for all rows at once by pointer jumping."""
    order = rows[time_lexsort((-frame.end[rows], frame.ts[rows]))]
    end = frame.end[order]
    up = np.arange(len(order)) - 1  # a parent candidate: every row skipped ends before the row
    todo = np.flatnonzero(up >= 0)
    while len(todo):
        todo = todo[end[up[todo]] < end[todo]]
        up[todo] = up[up[todo]]
        todo = todo[up[todo] >= 0]
    flagged = hit[order].astype(bool)  # a candidate at or above each row, 2^k rows up so far
    jump = up.copy()
    live = np.flatnonzero(jump >= 0)
    while len(live):
        flagged[live] |= flagged[jump[live]]
        jump[live] = jump[jump[live]]
        live = live[jump[live] >= 0]
    nested = np.zeros(len(frame), dtype=bool)
    nested[order] = np.where(up >= 0, flagged[np.maximum(up, 0)], False)
    result: np.ndarray = nested[rows]
    return result


def _inside(
    frame: RankFrame, roots: np.ndarray, launches: np.ndarray, gpu_of: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each root's kernels: the GPU ops of the `launches` (rows in start order, `gpu_of` their
    GPU op) that start and end inside the root, as (root's position in `roots`, GPU op row), by
    root, then by the GPU op's start (ties in launch order)."""
    starts = frame.ts[launches]
    lo = np.searchsorted(starts, frame.ts[roots], side="left")
    hi = np.searchsorted(starts, frame.ts[roots] + frame.dur[roots], side="right")
    count = np.maximum(hi - lo, 0)
    owner = np.repeat(np.arange(len(roots)), count)
    at = np.arange(int(count.sum())) + np.repeat(lo - (np.cumsum(count) - count), count)
    keep = frame.end[launches[at]] <= frame.end[roots[owner]]
    owner, gpu = owner[keep], gpu_of[at[keep]]
    order = np.lexsort((frame.ts[gpu], owner))  # stable: ties keep launch order
    return owner[order], gpu[order]


def frequent_kernel_sequences(
    frame: RankFrame, operator_name: str, min_pattern_len: int = MIN_PATTERN_LEN
) -> list[tuple[str, int, float, float]]:
    """(pattern joined by `|`, count, GPU us, CPU us) per pattern, most frequent first."""
    if not operator_name or not len(frame):
        return []
    cpu = np.flatnonzero(frame.stream == -1)
    hit = frame.names_matching(lambda name: operator_name in name)
    launch_cpu = np.flatnonzero((frame.stream == -1) & (frame.index_correlation > 0))
    launch_gpu = frame.linked_rows(launch_cpu)  # each CPU row that launched a GPU op, and its op
    keep = (launch_gpu >= 0) & (frame.stream[np.maximum(launch_gpu, 0)] != -1)
    launch_cpu, launch_gpu = launch_cpu[keep], launch_gpu[keep]
    thread = frame.pid.astype(np.int64) * (1 << 32) + frame.tid
    roots: list[tuple[int, np.ndarray]] = []  # (row, kernels)
    for key in np.unique(thread[cpu]).tolist():
        rows = cpu[thread[cpu] == key]
        cand = rows[hit[rows]]
        if not len(cand):
            continue
        cand = cand[~_nested_in_candidate(frame, rows, hit)[hit[rows]]]
        mine = np.flatnonzero(thread[launch_cpu] == key)
        mine = mine[np.argsort(frame.ts[launch_cpu[mine]], kind="stable")]
        owner, gpu = _inside(frame, cand, launch_cpu[mine], launch_gpu[mine])
        bounds = np.searchsorted(owner, np.arange(len(cand) + 1))
        # Only roots with a pattern's length of kernels count (most hold fewer: no slice for them).
        long = np.flatnonzero(np.diff(bounds) >= min_pattern_len).tolist()
        roots += [(int(cand[i]), gpu[bounds[i] : bounds[i + 1]]) for i in long]
    counts: dict[str, list[float]] = {}
    for row, gpu in roots:
        names = [frame.names[frame.name[row]]] + [frame.names[c] for c in frame.name[gpu].tolist()]
        entry = counts.setdefault("|".join(names), [0, 0.0, 0.0])
        entry[0] += 1
        entry[1] += float(frame.dur[gpu].sum())
        entry[2] += float(frame.dur[row])
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1][0], kv[0]))
    return [(p, int(v[0]), v[1], v[2]) for p, v in ordered]


@analysis(
    "kernel_sequences",
    "Frequent kernel sequences of the outermost ATen ops",
    "get_frequent_cuda_kernel_sequences",
    "answers where HTA 0.5.0 raises (its call stacks fail on every shared real trace)",
)
def kernel_sequences(trace: TraceSet, options: TraceOptions) -> AnalysisResult:
    rows = []
    per_rank: dict[int, dict[str, float]] = {}
    for frame in trace.frames():
        found = frequent_kernel_sequences(frame, DEFAULT_OPERATOR)
        rows += [(frame.rank, *p) for p in found[:TOP_K]]
        per_rank[frame.rank] = {"patterns": float(len(found))}
    table = "frequent_kernel_sequences"
    return AnalysisResult.of_table("kernel_sequences", table, COLUMNS, rows, per_rank)
