"""Critical path of one rank: the longest chain of dependent CPU and GPU work, and what bounds it.

Algorithm (HTA 0.5.0 `critical_path_analysis(rank, "ProfilerStep", 0)`, read from
`hta/analyzers/critical_path_analysis.py` and `hta/common/call_stack.py`):

1. Window: the first row (in frame order) whose name contains `ProfilerStep` (its
   `gpu_user_annotation` copy included, as HTA's `annotation in name` match does); the window is
   [its ts, its end]. Kept: CPU rows (`stream == -1`) starting inside the window with `dur > 0`,
   and GPU rows whose launching CPU row (`index_correlation` pointing at them) starts inside the
   window with `dur > 0`.
2. Nodes: a start and an end node for every kept operator or runtime row (cat `cpu_op`,
   `cuda_runtime`, `cuda_driver`) and every kept GPU row with `index_correlation >= 0`.
3. CPU edges, per (pid, tid) thread: its rows nest into a call stack (HTA's event order: time,
   ends before starts, a longer start first, a shorter end first, then index; an end pops the top
   of the stack whatever it is) and a depth-first walk links consecutive nodes: an operator edge
   (weight = the time between them; 0 when it closes a blocking sync call such as
   `cudaStreamSynchronize`), attributed to the event whose time it is; between two top-level
   operators, a zero-weight dependency edge.
4. GPU edges, kernels in start order: the kernel's own span; then a launch-delay edge from its
   runtime call's start when the launch found an empty queue (queue length 1 at the launch, 0 at
   the kernel start, HTA's `TraceCounters`) and the stream was idle at the launch, otherwise a
   kernel-kernel edge from the previous kernel on its stream. `Stream Sync`/`Context Sync` rows add
   a zero-weight edge from the last kernel on the stream (every stream) to the end of the
   synchronising call.
5. The longest path (networkx `dag_longest_path`: predecessors in insertion order, a path
   restarts where its length would go negative); weights <= -1 count 0, as HTA's validation sets.
   Each path edge is bound by: `cpu_bound` (a CPU event's time), `gpu_compute_bound`,
   `gpu_communication_bound` (a communication kernel), `gpu_kernel_kernel_overhead`,
   `gpu_kernel_launch_overhead`; dependency and sync edges carry no time.

The graph is built in critical_path_graph.py. Not reproduced: event-record syncs (`Event Sync`
after `cudaEventRecord`) add no edge (the loader does not keep the record's correlation). HTA
raises on 2021-format traces (cats `Operator`/`Runtime`); native mode reads those cats, takes every
ProfilerStep (else the whole trace) as the window, and without `cuda_sync` rows (PyTorch < 2.1)
adds the syncs blocking calls imply (critical_path_graph.Graph.implied_syncs), without which every
such path would be CPU-bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from analyzers.traces.analyses.base import AnalysisResult, Table, TraceOptions, analysis
from analyzers.traces.analyses.critical_path_graph import (
    KERNEL_KERNEL,
    LAUNCH,
    OPERATOR,
    CriticalPathError,
    Graph,
    kept_rows,
    queue_lengths,
)
from analyzers.traces.analyses.steps import profiler_steps
from analyzers.traces.classify import KernelClass
from analyzers.traces.frame import Mode, RankFrame, TraceSet

__all__ = ["CriticalPath", "CriticalPathError", "critical_path_of"]

PLUGIN_ORDER = 165  # before the what-if, which reads it
BOUND_BY = (
    "cpu_bound",
    "gpu_compute_bound",
    "gpu_communication_bound",
    "gpu_kernel_kernel_overhead",
    "gpu_kernel_launch_overhead",
)
_LABELS = (*BOUND_BY, "")  # "": an edge that carries no time
_ANNOTATION = "ProfilerStep"
SUMMARY_COLUMNS = ("rank", "bound_by", "duration_us", "share_pct")
EVENT_COLUMNS = ("rank", "name", "bound_by", "duration_us")


@dataclass
class CriticalPath:
    """One rank's path: per edge its row (-1: none), weight (us), kind, label (in _LABELS)."""

    window: tuple[float, float]
    nodes: int
    edges: int
    length_us: float
    rows: np.ndarray
    weights: np.ndarray
    kinds: np.ndarray
    label: np.ndarray
    begin_us: np.ndarray  # each path edge's source and destination times
    end_us: np.ndarray

    @property
    def bound_by(self) -> list[str]:
        return [_LABELS[k] for k in self.label.tolist()]


def _is_annotation(name: str) -> bool:
    return _ANNOTATION in name


def _window(frame: RankFrame, native: bool) -> tuple[float, float] | None:
    if native:  # the what-if's window: every step (steps.py), else the whole trace
        steps = profiler_steps(frame)
        if steps:
            return steps[0].start_us, steps[-1].end_us
        return (float(frame.ts.min()), float(frame.end.max())) if len(frame) else None
    rows = np.flatnonzero(frame.names_matching(_is_annotation))
    return (float(frame.ts[rows[0]]), float(frame.end[rows[0]])) if len(rows) else None


def critical_path_of(frame: RankFrame, native: bool) -> CriticalPath | None:
    """The rank's critical path over its default window, None without one; once per frame and
    mode (the report's analysis and the what-if both ask)."""
    memo: dict[bool, CriticalPath | Exception | None] = frame.memo.setdefault("critical_path", {})
    if native not in memo:
        try:
            memo[native] = _critical_path(frame, native)
        except CriticalPathError as exc:
            memo[native] = exc
    found = memo[native]
    if isinstance(found, Exception):
        raise found
    return found


def _critical_path(frame: RankFrame, native: bool) -> CriticalPath | None:
    window = _window(frame, native)
    if window is None:
        return None
    rows = kept_rows(frame, *window)
    graph = Graph(frame, rows, native)
    cpu = rows[frame.stream[rows] == -1]
    cpu = cpu[np.lexsort((frame.tid[cpu], frame.pid[cpu]))]  # by thread
    key = frame.pid[cpu].astype(np.int64) * (1 << 32) + frame.tid[cpu]
    for part in np.split(cpu, np.flatnonzero(np.diff(key)) + 1):
        if len(part):
            graph.cpu_thread(np.sort(part, kind="stable"))  # already sorted: timsort reads it once
    graph.gpu(rows, queue_lengths(frame))
    if native and frame.sym("cuda_sync") < 0:
        graph.implied_syncs(rows)
    path = graph.longest_path()
    p_rows, weights, kinds = graph.attr[path], graph.weight[path], graph.kind[path]
    at = np.maximum(p_rows, 0)
    first_that_holds = {  # else gpu_compute_bound
        "gpu_kernel_kernel_overhead": kinds == KERNEL_KERNEL,
        "gpu_kernel_launch_overhead": kinds == LAUNCH,
        "": (kinds != OPERATOR) | (p_rows < 0),
        "cpu_bound": frame.stream[at] < 0,
        "gpu_communication_bound": frame.kernel_class[at] == int(KernelClass.COMMUNICATION),
    }
    choices = [_LABELS.index(label) for label in first_that_holds]
    label = np.select(list(first_that_holds.values()), choices, _LABELS.index("gpu_compute_bound"))
    length = float(np.where(weights <= -1, 0.0, weights).sum())
    begin, end = graph.node_ts[graph.src[path]], graph.node_ts[graph.dst[path]]
    nodes, edges = len(graph.node_ts), len(graph.src)
    return CriticalPath(window, nodes, edges, length, p_rows, weights, kinds, label, begin, end)


def _top_events(frame: RankFrame, path: CriticalPath, top: int) -> list[tuple[str, str, float]]:
    """The `top` (name, bound_by) pairs of the path's timed edges by total time, ties in order
    of first appearance (bincount sums in path order, as a running Python sum would)."""
    timed = np.flatnonzero((path.rows >= 0) & (path.weights > 0))
    key = frame.name[path.rows[timed]].astype(np.int64) * len(_LABELS) + path.label[timed]
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    totals = np.bincount(inverse.reshape(-1), weights=path.weights[timed])
    by_first = np.argsort(first, kind="stable")
    chosen = by_first[np.argsort(-totals[by_first], kind="stable")][:top]
    pairs = [divmod(int(key[first[g]]), len(_LABELS)) for g in chosen.tolist()]
    return [
        (frame.names[name], _LABELS[label], float(totals[g]))
        for (name, label), g in zip(pairs, chosen.tolist(), strict=True)
    ]


@analysis(
    "critical_path",
    "Critical path",
    "critical_path_analysis",
    "every ProfilerStep (HTA: one); 2021-format traces (HTA raises on them)",
)
def critical_path(trace: TraceSet, options: TraceOptions) -> AnalysisResult:
    native = trace.mode is Mode.NATIVE
    rows: list[tuple[object, ...]] = []
    events: list[tuple[object, ...]] = []
    per_rank: dict[int, dict[str, float]] = {}
    notes: list[str] = []
    for frame in trace.frames():
        try:
            path = critical_path_of(frame, native)
        except CriticalPathError as exc:
            notes.append(f"rank {frame.rank}: no critical path ({exc}; HTA 0.5.0 raises too)")
            continue
        if path is None:
            notes.append(f"rank {frame.rank}: no {_ANNOTATION} annotation to analyse")
            continue
        values = {"length_us": path.length_us, "nodes": float(path.nodes)}
        values["edges"] = float(path.edges)
        for label in BOUND_BY:
            total = float(path.weights[path.label == _LABELS.index(label)].sum())
            values[f"{label}_us"] = total
            share = 100.0 * total / path.length_us if path.length_us > 0 else math.nan
            rows.append((frame.rank, label, total, share))
        per_rank[frame.rank] = values
        events += [(frame.rank, *event) for event in _top_events(frame, path, options.top_kernels)]
    summary = Table("critical_path_summary", SUMMARY_COLUMNS, tuple(rows))
    top = Table("critical_path_top_events", EVENT_COLUMNS, tuple(events))
    return AnalysisResult("critical_path", (summary, top), per_rank, tuple(notes))
