"""Critical path of one rank: the longest chain of dependent CPU and GPU work, and what bounds it.

Algorithm (HTA 0.5.0 `critical_path_analysis(rank, "ProfilerStep", 0)`, read from
`hta/analyzers/critical_path_analysis.py` and `hta/common/call_stack.py`):
1. Window: [ts, end] of the first row (in frame order) whose name contains `ProfilerStep` (its
   `gpu_user_annotation` copy included: HTA's `annotation in name`). Kept: CPU rows (`stream ==
   -1`) with `dur > 0` starting inside it, and the GPU rows they launched (`index_correlation`).
2. Nodes: a start and an end node for every kept operator or runtime row (cat `cpu_op`,
   `cuda_runtime`, `cuda_driver`) and every kept GPU row with `index_correlation >= 0`.
3. CPU edges, per (pid, tid) thread: its rows nest into a call stack (HTA's event order: time,
   ends before starts, a longer start first, a shorter end first, then index; an end pops the top
   whatever it is) and a depth-first walk links consecutive nodes: an operator edge (weight = the
   time between them; 0 when it closes a blocking sync call such as `cudaStreamSynchronize`),
   attributed to the event whose time it is; between two top-level operators, a zero-weight
   dependency edge.
4. GPU edges, kernels in start order: the kernel's own span; then a launch-delay edge from its
   runtime call's start when the launch found an empty queue (length 1 at the launch, 0 at the
   kernel start, HTA's `TraceCounters`: a CUDA graph's launch counts once per op) and an idle
   stream, else a kernel-kernel edge from the previous kernel on its stream. `Stream Sync` and
   `Context Sync` (every stream) add a zero-weight edge from the stream's last kernel to the end of
   the synchronising call.
5. The longest path (networkx `dag_longest_path`: predecessors in insertion order, a path
   restarts where its length would go negative); weights <= -1 count 0, as HTA's validation sets.
   Each path edge is bound by: `cpu_bound` (a CPU event's time), `gpu_compute_bound`,
   `gpu_communication_bound`, `gpu_kernel_kernel_overhead`, `gpu_kernel_launch_overhead`;
   dependency and sync edges carry no time.

Edges are added in HTA's order (it decides which duplicate pair and tied predecessor networkx
keeps); the call-stack walk and the longest path run in `_kineto_columns`. Not reproduced:
`Event Sync` after `cudaEventRecord` adds no edge (the loader drops the record's correlation).
HTA raises on 2021-format traces (cats `Operator`/`Runtime`) and on a launch of several GPU ops
in the window (a cycle); native mode reads those cats, takes every ProfilerStep (else the whole
trace) as the window, and without `cuda_sync` rows (PyTorch < 2.1) adds the syncs blocking calls
imply (`Graph.implied_syncs`), else every such path would be CPU-bound.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from analyzers.traces import _kineto_columns as _c
from analyzers.traces.analyses.base import AnalysisResult, Table, TraceOptions, analysis
from analyzers.traces.analyses.queue_length import launch_changes
from analyzers.traces.analyses.steps import profiler_steps
from analyzers.traces.classify import KernelClass
from analyzers.traces.frame import I64, Mask, Mode, RankFrame, TraceSet
from analyzers.traces.stats import time_lexsort

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
_IS_ANNOTATION = re.compile(_ANNOTATION).search  # one predicate: names_matching keeps its answers
SUMMARY_COLUMNS = ("rank", "bound_by", "duration_us", "share_pct")
EVENT_COLUMNS = ("rank", "name", "bound_by", "duration_us")
OPERATOR, DEPENDENCY, LAUNCH, KERNEL_KERNEL, SYNC = 0, 1, 2, 3, 4
HTA_NODE_CATS = frozenset({"cpu_op", "cuda_runtime", "cuda_driver"})
NATIVE_NODE_CATS = HTA_NODE_CATS | {"Operator", "Runtime", "Driver"}
BLOCKING_SYNC_CALLS = frozenset(  # HTA's list of the calls that block the host
    [f"cuda{on}Synchronize" for on in ("Device", "Stream", "Event")]
    + ["cudaEventQuery", "cudaMemcpy", "cudaMemcpyAsync"]
)


class CriticalPathError(Exception):
    """HTA would not answer (its assertion on a launch without a runtime node)."""


def queue_lengths(frame: RankFrame) -> tuple[np.ndarray, Mask]:
    """Queue length per row after its change point (NaN: not one), HTA's TraceCounters summed per
    stream in time order, and which rows launch several GPU ops (a CUDA graph's launch counts +1
    per op; its row reads the length after its first op). In the frame's memo (32 bits a point):
    the path over HTA's window and the what-if's read it."""
    out = np.full(len(frame), math.nan)
    if "queue changes" not in frame.memo:
        r, ops, delta = launch_changes(frame)
        r, ops, delta = r[ops >= 0], ops[ops >= 0], delta[ops >= 0]  # -1: no GPU op, no stream
        streams = frame.stream[ops]
        order = np.lexsort((frame.sort_key(frame.ts[r]), streams))  # by stream, in time order
        s, d = streams[order], np.asarray(delta, dtype=np.int64)[order]
        level = np.cumsum(d)
        first = np.flatnonzero(np.diff(s, prepend=s[:1] - 1))  # each stream's first
        level -= np.repeat(level[first] - d[first], np.diff([*first, len(order)]))  # sum before
        frame.memo["queue changes"] = r[order].astype(np.int32), level.astype(np.int32)
    rows, levels = frame.memo["queue changes"]
    out[rows[::-1]] = levels[::-1]  # a row's first change point is written last
    return out, np.bincount(rows, minlength=len(frame)) > 1


def kept_rows(frame: RankFrame, start: float, end: float) -> np.ndarray:
    in_window = (frame.stream == -1) & (frame.ts >= start) & (frame.ts <= end) & (frame.dur > 0)
    keep = in_window.copy()
    gpu_rows = frame.linked_rows(np.flatnonzero(in_window & (frame.index_correlation >= 0)))
    keep[gpu_rows[(gpu_rows >= 0) & (frame.stream[gpu_rows] != -1)]] = True
    keep |= (frame.stream != -1) & (frame.name == frame.sym("Stream Wait Event"))
    rows = np.flatnonzero(keep)
    return rows[np.argsort(frame.index[rows], kind="stable")]


class Graph:
    def __init__(self, frame: RankFrame, rows: np.ndarray, native: bool) -> None:
        self.frame = frame
        cats = NATIVE_NODE_CATS if native else HTA_NODE_CATS
        gpu_op = (frame.stream[rows] != -1) & (frame.index_correlation[rows] >= 0)
        node_rows = rows[frame.cat_in(cats)[rows] | gpu_op]
        ts = np.concatenate([frame.ts[node_rows], frame.end[node_rows]])
        order = np.argsort(ts, kind="stable")
        n = len(node_rows)
        self.node_row = np.concatenate([node_rows, node_rows])[order].astype(np.int64)
        self.node_ts = ts[order]
        position = np.empty(2 * n, dtype=np.int64)
        position[order] = np.arange(2 * n)
        self.start_of, self.end_of = np.full((2, len(frame)), -1, dtype=np.int64)
        self.start_of[node_rows], self.end_of[node_rows] = position[:n], position[n:]
        self.blocking = frame.name_in(BLOCKING_SYNC_CALLS)
        self._blocks: list[tuple[I64, I64, I64, np.ndarray, I64]] = []

    def add(self, u: I64, v: I64, kind: I64, attr: I64, zero: Mask | bool = False) -> None:
        """Edges u[i] -> v[i], weighing the time between the nodes (0 where `zero`, and for
        dependency and sync edges); node -1 reads the last node, as HTA's does."""
        no_time = (kind == DEPENDENCY) | (kind == SYNC) | zero
        weight = np.where(no_time, 0.0, self.node_ts[v] - self.node_ts[u])
        self._blocks.append((u, v, kind, weight, attr))

    def cpu_thread(self, rows: np.ndarray) -> None:
        """Step 3 of the module docstring over one thread's rows (sorted)."""
        f = self.frame
        ts, dur, idx = f.ts[rows], f.dur[rows], f.index[rows]
        n = len(rows)
        # HTA's compare_events as a key (all rows here have dur > 0): time, ends before starts,
        # starts longest first then by index, ends shortest first then by index descending.
        t = np.concatenate([ts, ts + dur])
        is_start = np.concatenate([np.ones(n, bool), np.zeros(n, bool)])
        order = time_lexsort(
            (np.concatenate([idx, -idx]), np.concatenate([-dur, dur]), is_start, t)
        )
        starts = is_start[order]
        local = order[starts]  # the rows' positions in preorder
        walk, parent = (np.frombuffer(a, np.int64) for a in _c.stack_walk(starts.view(np.uint8)))
        enter = walk < n
        k = np.where(enter, walk, walk - n)
        row = rows[local[k]]
        par = np.where(parent[k] >= 0, rows[local[parent[k]]], -1)
        node = np.where(enter, self.start_of[row], self.end_of[row])
        keep = node >= 0
        enter, row, par, node = enter[keep], row[keep], par[keep], node[keep]
        if len(node) < 2:
            return
        depth_after = np.cumsum(np.where(enter, 1, -1))
        u, v = node[:-1], node[1:]
        dependency = ~enter[:-1] & (depth_after[:-1] == 0)
        attr = np.select([dependency, enter[:-1], ~enter[1:]], [-1, row[:-1], row[1:]], par[:-1])
        kind = np.where(dependency, DEPENDENCY, OPERATOR)
        self.add(u, v, kind, attr, zero=~enter[1:] & self.blocking[row[1:]])

    def gpu(self, rows: np.ndarray, queue: np.ndarray) -> None:
        """Step 4 of the module docstring (a `Context Sync` waits on every stream)."""
        f = self.frame
        named = f.name_in({"Event Sync", "Context Sync"})[rows]
        sel = rows[((f.stream[rows] != -1) | named) & (f.index_correlation[rows] >= 0)]
        is_sync = f.cat[sel] == f.sym("cuda_sync")
        order = np.argsort(np.where(is_sync, f.end[sel], f.ts[sel]), kind="stable")
        sel, is_sync = sel[order], is_sync[order]
        runtime = f.linked_rows(sel)
        at = np.flatnonzero(~is_sync)
        krow, rt = sel[at], runtime[at]
        stream = f.stream[krow]
        s, e = self.start_of[krow], self.end_of[krow]
        name, target = f.name[sel], np.where(runtime >= 0, self.end_of[runtime], -1)
        waits = is_sync & (target >= 0)
        has_prev = np.zeros(len(at), dtype=bool)
        prev = np.full(len(at), -1, dtype=np.int64)  # the end of the previous kernel on the stream
        syncs = []  # per stream, its sync edges: (position in sel, u, v, kind, attr)
        streams, first_at = np.unique(stream, return_index=True)
        for sid in streams[np.argsort(first_at)].tolist():
            on = np.flatnonzero(stream == sid)  # this stream's kernels, in order
            has_prev[on[1:]] = True
            prev[on[1:]] = e[on[:-1]]
            on_sid = (name == f.sym("Stream Sync")) & (f.stream[sel] == sid)
            asks = np.flatnonzero(waits & ((name == f.sym("Context Sync")) | on_sid))
            j = np.searchsorted(at[on], asks) - 1
            asks, j = asks[j >= 0], j[j >= 0]
            syncs.append(
                (asks, e[on[j]], target[asks], np.full(len(asks), SYNC), np.full(len(asks), -1))
            )
        launch = (rt >= 0) & (queue[rt] == 1) & (queue[krow] == 0)
        launch &= ~has_prev | (self.node_ts[prev] < f.ts[rt])
        rt_start = self.start_of[rt]
        missing = np.flatnonzero(launch & (rt_start < 0))
        if len(missing):
            row = krow[missing[0]]
            raise CriticalPathError(
                f"no runtime node for the launch of {f.texts[f.name[row]]!r} "
                f"(correlation {int(f.correlation[row])})"
            )
        second = launch | has_prev
        blocks = [
            (at, s, e, np.full(len(at), OPERATOR), krow),
            (
                at[second],
                np.where(launch, rt_start, prev)[second],
                s[second],
                np.where(launch, LAUNCH, KERNEL_KERNEL)[second],
                np.where(launch, -1, self.node_row[prev])[second],
            ),
            *syncs,
        ]
        # Edges in the order of their row in sel: a stable sort keeps the blocks' order there.
        order = np.argsort(np.concatenate([b[0] for b in blocks]), kind="stable")
        u, v, kind, attr = (np.concatenate([b[i] for b in blocks])[order] for i in range(1, 5))
        self.add(u, v, kind, attr)

    def implied_syncs(self, rows: np.ndarray) -> None:
        """Native mode without `cuda_sync` rows: a sync edge from the last GPU op ending inside a
        blocking call (it returned when the GPU work it waited for did) to the call's end."""
        f = self.frame
        is_node = self.start_of[rows] >= 0
        gpu = rows[(f.stream[rows] != -1) & is_node]
        calls = rows[(f.stream[rows] == -1) & is_node & self.blocking[rows]]
        gpu = gpu[np.argsort(f.end[gpu], kind="stable")]
        ends = f.end[gpu]
        k = np.searchsorted(ends, f.end[calls], side="right") - 1
        ok = k >= 0
        ok[ok] = ends[k[ok]] > f.ts[calls[ok]]
        calls, k = calls[ok], k[ok]
        self.add(
            self.end_of[gpu[k]], self.end_of[calls], np.full(len(k), SYNC), np.full(len(k), -1)
        )

    def longest_path(self) -> tuple[I64, int]:
        """The path's edge ids (each its pair's last edge, whose kind and attribution networkx
        keeps) and the number of pairs; raises on a cycle."""
        self.src, self.dst, self.kind, self.weight, self.attr = (
            np.concatenate([b[i] for b in self._blocks]) for i in range(5)
        )
        self._blocks.clear()
        found = _c.longest_path(len(self.node_ts), self.src, self.dst, self.weight)
        if found is None:
            raise CriticalPathError("the dependency graph has a cycle")
        return np.frombuffer(found[0], dtype=np.int64), found[1]


@dataclass(eq=False)  # hashed by identity: the what-if keys its memo by the path
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


def _window(frame: RankFrame, native: bool) -> tuple[float, float] | None:
    if native:  # the what-if's window: every step (steps.py), else the whole trace
        steps = profiler_steps(frame)
        if steps:
            return steps[0].start_us, steps[-1].end_us
        return (float(frame.ts.min()), float(frame.end.max())) if len(frame) else None
    rows = np.flatnonzero(frame.names_matching(_IS_ANNOTATION))
    return (float(frame.ts[rows[0]]), float(frame.end[rows[0]])) if len(rows) else None


def critical_path_of(frame: RankFrame, native: bool) -> CriticalPath | None:
    """The rank's critical path over its default window (None without one), memoised."""
    memo: dict[bool, CriticalPath | Exception | None] = frame.memo.setdefault("critical_path", {})
    if native not in memo:
        try:
            memo[native] = _critical_path(frame, native)
        except CriticalPathError as exc:
            memo[native] = exc
    if isinstance(found := memo[native], Exception):
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
        graph.cpu_thread(np.sort(part, kind="stable"))  # already sorted: timsort reads it once
    queue, several = queue_lengths(frame)
    launches = frame.linked_rows(rows[frame.stream[rows] != -1])
    if not native and several[launches[launches >= 0]].any():
        # HTA joins the queue series on the launch's row, reads the kernel once per change
        # point, and links its second reading after its own end: a cycle, which it refuses.
        raise CriticalPathError("a launch of several GPU ops (a CUDA graph) in the window")
    graph.gpu(rows, queue)
    if native and frame.sym("cuda_sync") < 0:
        graph.implied_syncs(rows)
    path, edges = graph.longest_path()
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
    nodes = len(np.unique(np.concatenate([graph.src, graph.dst])))  # with an edge, as networkx's
    return CriticalPath(window, nodes, edges, length, p_rows, weights, kinds, label, begin, end)


def _top_events(frame: RankFrame, path: CriticalPath, top: int) -> list[tuple[str, str, float]]:
    """The `top` (name, bound_by) pairs of the path's timed edges by total time, ties in order
    of first appearance (bincount sums in path order, as HTA's running sum)."""
    timed = np.flatnonzero((path.rows >= 0) & (path.weights > 0))
    name, label = frame.name[path.rows[timed]].astype(np.int64), path.label[timed]
    key = name * len(_LABELS) + label
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    totals = np.bincount(inverse.reshape(-1), weights=path.weights[timed])
    by_first = np.argsort(first, kind="stable")
    top_g = by_first[np.argsort(-totals[by_first], kind="stable")][:top].tolist()
    row = first.tolist()
    return [(frame.texts[name[row[g]]], _LABELS[label[row[g]]], float(totals[g])) for g in top_g]


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
        values = dict(length_us=path.length_us, nodes=float(path.nodes), edges=float(path.edges))
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
