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

Not reproduced: the event-record syncs (`Event Sync` after `cudaEventRecord`,
`cudaStreamWaitEvent`): they need `wait_on_cuda_event_record_corr_id`, which the loader does not
keep; such syncs add no edge here. HTA raises on 2021-format traces (cats `Operator`/`Runtime`:
no CPU node, then an assertion); HTA mode says so, native mode reads those cats. Native mode's
window is every ProfilerStep (HTA analyses one), and the whole trace when there are none; in a
trace without `cuda_sync` rows (PyTorch before 2.1) native mode adds the syncs the blocking calls
imply (a sync edge from the last GPU op ending inside the call to its end), without which the
GPU could never hold up the CPU and every such path would be CPU-bound.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from analyzers.traces.analyses.base import AnalysisResult, Table, TraceOptions, analysis
from analyzers.traces.analyses.queue_length import RUNTIME_LAUNCHES
from analyzers.traces.analyses.steps import profiler_steps
from analyzers.traces.classify import KernelClass
from analyzers.traces.frame import Mode, RankFrame, TraceSet

__all__ = ["CriticalPath", "critical_path_of"]

BOUND_BY = (
    "cpu_bound",
    "gpu_compute_bound",
    "gpu_communication_bound",
    "gpu_kernel_kernel_overhead",
    "gpu_kernel_launch_overhead",
)
OPERATOR, DEPENDENCY, LAUNCH, KERNEL_KERNEL, SYNC = 0, 1, 2, 3, 4
HTA_NODE_CATS = frozenset({"cpu_op", "cuda_runtime", "cuda_driver"})
NATIVE_NODE_CATS = HTA_NODE_CATS | {"Operator", "Runtime", "Driver"}
BLOCKING_SYNC_CALLS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventQuery",
        "cudaEventSynchronize",
        "cudaMemcpy",
        "cudaMemcpyAsync",
    }
)
_ANNOTATION = "ProfilerStep"


class CriticalPathError(Exception):
    """HTA would not answer (its assertion on a launch without a runtime node)."""


@dataclass
class CriticalPath:
    """One rank's path: per path edge its row (-1: none), weight (us) and `bound_by` label."""

    window: tuple[float, float]
    nodes: int
    edges: int
    length_us: float
    rows: np.ndarray
    weights: np.ndarray
    kinds: np.ndarray
    bound_by: list[str]
    begin_us: np.ndarray  # each path edge's source and destination times
    end_us: np.ndarray


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


def _queue_lengths(frame: RankFrame) -> np.ndarray:
    """Queue length per row after its change point (NaN: not a change point), HTA's TraceCounters
    over the whole rank: +1 at a launch on its kernel's stream, -1 at the kernel's start."""
    out = np.full(len(frame), math.nan)
    runtime = np.flatnonzero(frame.name_in(RUNTIME_LAUNCHES))
    gpu = np.flatnonzero(frame.stream != -1)
    stream_of_corr: dict[int, int] = {}
    for row in gpu.tolist():
        stream_of_corr.setdefault(int(frame.correlation[row]), int(frame.stream[row]))
    launched = set(frame.correlation[runtime].tolist())
    rows, streams, delta = [], [], []
    for row in runtime.tolist():
        s = stream_of_corr.get(int(frame.correlation[row]))
        if s is not None:
            rows.append(row)
            streams.append(s)
            delta.append(1)
    for row in gpu.tolist():
        if int(frame.correlation[row]) in launched:
            rows.append(row)
            streams.append(int(frame.stream[row]))
            delta.append(-1)
    r = np.array(rows, dtype=np.int64)
    order = np.argsort(frame.sort_key(frame.ts[r]), kind="stable")
    level: dict[int, int] = {}
    for k in order.tolist():
        level[streams[k]] = level.get(streams[k], 0) + delta[k]
        out[r[k]] = level[streams[k]]
    return out


def _kept_rows(frame: RankFrame, start: float, end: float) -> np.ndarray:
    cpu = frame.stream == -1
    in_window = cpu & (frame.ts >= start) & (frame.ts <= end) & (frame.dur > 0)
    keep = in_window.copy()
    row_of = frame.row_of_index()
    launchers = np.flatnonzero(in_window & (frame.index_correlation >= 0))
    targets = frame.index_correlation[launchers]
    ok = targets < len(row_of)
    gpu_rows = row_of[targets[ok]]
    gpu_rows = gpu_rows[gpu_rows >= 0]
    keep[gpu_rows[frame.stream[gpu_rows] != -1]] = True
    wait = frame.sym("Stream Wait Event")
    keep |= (frame.stream != -1) & (frame.name == wait)
    rows = np.flatnonzero(keep)
    return rows[np.argsort(frame.index[rows], kind="stable")]


class _Graph:
    def __init__(self, frame: RankFrame, rows: np.ndarray, native: bool) -> None:
        self.frame = frame
        cats = NATIVE_NODE_CATS if native else HTA_NODE_CATS
        is_node = frame.cat_in(cats)[rows] | (
            (frame.stream[rows] != -1) & (frame.index_correlation[rows] >= 0)
        )
        node_rows = rows[is_node]
        ts = np.concatenate([frame.ts[node_rows], frame.end[node_rows]])
        order = np.argsort(ts, kind="stable")
        n = len(node_rows)
        self.node_row = np.concatenate([node_rows, node_rows])[order]
        self.node_ts = ts[order]
        self.node_start = order < n
        position = np.empty(2 * n, dtype=np.int64)
        position[order] = np.arange(2 * n)
        self.start_of = dict(zip(node_rows.tolist(), position[:n].tolist(), strict=True))
        self.end_of = dict(zip(node_rows.tolist(), position[n:].tolist(), strict=True))
        self.blocking = set(np.flatnonzero(frame.name_in(BLOCKING_SYNC_CALLS)).tolist())
        self.src: list[int] = []
        self.dst: list[int] = []
        self.kind: list[int] = []
        self.weight: list[float] = []
        self.attr: list[int] = []
        self.edge_at: dict[tuple[int, int], int] = {}
        self._columns: tuple[list[Any], ...] = (
            self.src,
            self.dst,
            self.kind,
            self.weight,
            self.attr,
        )

    def add(self, u: int, v: int, kind: int, attr: int = -1, zero: bool = False) -> None:
        w = 0.0 if zero or kind in (DEPENDENCY, SYNC) else float(self.node_ts[v] - self.node_ts[u])
        key = (u, v)
        if key in self.edge_at:  # networkx keeps one edge per pair: the last one added
            i = self.edge_at[key]
            self.kind[i], self.weight[i], self.attr[i] = kind, w, attr
            return
        self.edge_at[key] = len(self.src)
        for column, value in zip(self._columns, (u, v, kind, w, attr), strict=True):
            column.append(value)

    def cpu_thread(self, rows: np.ndarray) -> None:
        f = self.frame
        ts, dur, idx = f.ts[rows], np.maximum(f.dur[rows], 0), f.index[rows]
        n = len(rows)
        # HTA's compare_events as a key (all rows here have dur > 0): time, ends before starts,
        # starts longest first then by index, ends shortest first then by index descending.
        t = np.concatenate([ts, ts + dur])
        is_start = np.concatenate([np.ones(n, bool), np.zeros(n, bool)])
        d = np.concatenate([-dur, dur])
        i = np.concatenate([idx, -idx])
        order = np.lexsort((i, d, is_start, t))
        local = np.concatenate([np.arange(n), np.arange(n)])[order].tolist()
        starts = is_start[order].tolist()
        parent = [-1] * n
        children: dict[int, list[int]] = {-1: []}
        stack: list[int] = []
        for k, s in zip(local, starts, strict=True):
            if s:
                parent[k] = stack[-1] if stack else -1
                children.setdefault(parent[k], []).append(k)
                children[k] = []
                stack.append(k)
            elif stack:
                stack.pop()
        self._walk(rows.tolist(), parent, children)

    def _walk(self, rows: list[int], parent: list[int], children: dict[int, list[int]]) -> None:
        last: int | None = None
        last_top: int | None = None
        last_parent = -1
        depth = 0
        todo: list[tuple[int, bool]] = [(c, True) for c in reversed(children[-1])]
        while todo:
            k, entering = todo.pop()
            row = rows[k]
            s, e = self.start_of.get(row), self.end_of.get(row)
            par = rows[parent[k]] if parent[k] >= 0 else -1
            if entering:
                todo.append((k, False))
                todo.extend((c, True) for c in reversed(children[k]))
                if s is None or e is None:
                    continue
                if depth == 0 and last_top is not None:
                    self.add(last_top, s, DEPENDENCY)
                depth += 1
                if last is not None:
                    self._cpu_edge(last, s, last_parent)
                last, last_parent = s, par
            else:
                if s is None or e is None:
                    continue
                depth -= 1
                if last is not None:
                    self._cpu_edge(last, e, last_parent, zero=row in self.blocking)
                if depth == 0:
                    last, last_top = None, e
                else:
                    last, last_parent = e, par

    def _cpu_edge(self, u: int, v: int, src_parent: int, zero: bool = False) -> None:
        if self.node_start[u]:
            attr = int(self.node_row[u])
        elif not self.node_start[v]:
            attr = int(self.node_row[v])
        else:
            attr = src_parent
        self.add(u, v, OPERATOR, attr, zero)

    def gpu(self, rows: np.ndarray, queue: np.ndarray) -> None:
        f = self.frame
        syncs = {f.sym("Event Sync"), f.sym("Context Sync")}
        sync_cat = f.sym("cuda_sync")
        sel = rows[
            ((f.stream[rows] != -1) | np.isin(f.name[rows], list(syncs)))
            & (f.index_correlation[rows] >= 0)
        ]
        is_sync = f.cat[sel] == sync_cat
        sort_by = np.where(is_sync, f.end[sel], f.ts[sel])
        sel = sel[np.argsort(sort_by, kind="stable")]
        row_of = f.row_of_index()
        last: dict[int, int] = {}
        stream_sync, context_sync = f.sym("Stream Sync"), f.sym("Context Sync")
        for row in sel.tolist():
            link = int(f.index_correlation[row])
            runtime = int(row_of[link]) if 0 <= link < len(row_of) else -1
            if f.cat[row] == sync_cat:
                name = f.name[row]
                if name in (stream_sync, context_sync) and runtime >= 0:
                    ends = (
                        list(last.values())
                        if name == context_sync
                        else [last.get(int(f.stream[row]))]
                    )
                    target = self.end_of.get(runtime)
                    for node in ends:
                        if node is not None and target is not None:
                            self.add(node, target, SYNC)
                continue
            stream = int(f.stream[row])
            s, e = self.start_of[row], self.end_of[row]
            self.add(s, e, OPERATOR, row)
            runtime_ts = f.ts[runtime] if runtime >= 0 else math.nan
            prev = last.get(stream)
            if (
                runtime >= 0
                and queue[runtime] == 1
                and queue[row] == 0
                and (prev is None or self.node_ts[prev] < runtime_ts)
            ):
                start = self.start_of.get(runtime)
                if start is None:
                    raise CriticalPathError(
                        f"no runtime node for the launch of {f.names[f.name[row]]!r} "
                        f"(correlation {int(f.correlation[row])})"
                    )
                self.add(start, s, LAUNCH)
            elif prev is not None:
                self.add(prev, s, KERNEL_KERNEL, int(self.node_row[prev]))
            last[stream] = e

    def implied_syncs(self, rows: np.ndarray) -> None:
        """Native mode, for traces without `cuda_sync` rows (PyTorch before 2.1): a blocking call
        (`cudaStreamSynchronize`, `cudaMemcpy`, ...) returned when the GPU work it waited for
        did: a sync edge from the last GPU op ending inside the call to the call's end."""
        f = self.frame
        gpu = rows[(f.stream[rows] != -1) & np.isin(rows, list(self.start_of))]
        calls = rows[(f.stream[rows] == -1) & np.isin(rows, list(self.blocking))]
        calls = calls[np.isin(calls, list(self.end_of))]
        if not len(gpu) or not len(calls):
            return
        gpu = gpu[np.argsort(f.end[gpu], kind="stable")]
        ends = f.end[gpu]
        k = np.searchsorted(ends, f.end[calls], side="right") - 1
        for call, j in zip(calls.tolist(), k.tolist(), strict=True):
            if j >= 0 and ends[j] > f.ts[call]:
                self.add(self.end_of[int(gpu[j])], self.end_of[call], SYNC)

    def longest_path(self) -> list[int]:
        """Edge ids of networkx's `dag_longest_path` (weights <= -1 as 0); raises on a cycle."""
        n = len(self.node_ts)
        pred: list[list[int]] = [[] for _ in range(n)]
        succ: list[list[int]] = [[] for _ in range(n)]
        indeg = [0] * n
        for i, (u, v) in enumerate(zip(self.src, self.dst, strict=True)):
            pred[v].append(i)
            succ[u].append(v)
            indeg[v] += 1
        w = [0.0 if x <= -1 else x for x in self.weight]
        ready = deque(k for k in range(n) if indeg[k] == 0)
        dist = [0.0] * n
        via = [-1] * n
        seen = 0
        while ready:
            v = ready.popleft()
            seen += 1
            best, best_edge = 0.0, -1
            for i in pred[v]:
                cand = dist[self.src[i]] + w[i]
                if best_edge < 0 or cand > best:
                    best, best_edge = cand, i
            if best_edge >= 0 and best >= 0:
                dist[v], via[v] = best, best_edge
            for x in succ[v]:
                indeg[x] -= 1
                if indeg[x] == 0:
                    ready.append(x)
        if seen < n:
            raise CriticalPathError("the dependency graph has a cycle")
        if n == 0:
            return []
        v = max(range(n), key=lambda k: dist[k])
        path: list[int] = []
        while via[v] >= 0:
            path.append(via[v])
            v = self.src[via[v]]
        return path[::-1]


def critical_path_of(
    frame: RankFrame, native: bool, window: tuple[float, float] | None = None
) -> CriticalPath | None:
    """The rank's critical path over `window` (default: see the module docstring); None when
    there is no window (HTA: no ProfilerStep annotation)."""
    window = window or _window(frame, native)
    if window is None:
        return None
    rows = _kept_rows(frame, *window)
    graph = _Graph(frame, rows, native)
    cpu = rows[frame.stream[rows] == -1]
    threads = np.lexsort((frame.tid[cpu], frame.pid[cpu]))
    cpu = cpu[threads]
    key = frame.pid[cpu].astype(np.int64) * (1 << 32) + frame.tid[cpu]
    for part in np.split(cpu, np.flatnonzero(np.diff(key)) + 1):
        if len(part):
            graph.cpu_thread(np.sort(part))
    graph.gpu(rows, _queue_lengths(frame))
    if native and frame.sym("cuda_sync") < 0:
        graph.implied_syncs(rows)
    path = graph.longest_path()
    p_rows = np.array([graph.attr[i] for i in path], dtype=np.int64)
    weights = np.array([graph.weight[i] for i in path], dtype=np.float64)
    kinds = np.array([graph.kind[i] for i in path], dtype=np.int64)
    comm = frame.kernel_class == int(KernelClass.COMMUNICATION)
    labels = []
    for row, kind in zip(p_rows.tolist(), kinds.tolist(), strict=True):
        if kind == KERNEL_KERNEL:
            labels.append("gpu_kernel_kernel_overhead")
        elif kind == LAUNCH:
            labels.append("gpu_kernel_launch_overhead")
        elif kind != OPERATOR or row < 0:
            labels.append("")
        elif frame.stream[row] < 0:
            labels.append("cpu_bound")
        else:
            labels.append("gpu_communication_bound" if comm[row] else "gpu_compute_bound")
    length = float(np.maximum(np.where(weights <= -1, 0.0, weights), -np.inf).sum())
    begin = graph.node_ts[np.array([graph.src[i] for i in path], dtype=np.int64)]
    end = graph.node_ts[np.array([graph.dst[i] for i in path], dtype=np.int64)]
    return CriticalPath(
        window, len(graph.node_ts), len(graph.src), length, p_rows, weights, kinds, labels,
        begin, end,
    )  # fmt: skip


PLUGIN_ORDER = 165  # before the what-if, which reads it


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
        labels = np.array(path.bound_by, dtype=object)
        for label in BOUND_BY:
            total = float(path.weights[labels == label].sum()) if len(labels) else 0.0
            values[f"{label}_us"] = total
            share = 100.0 * total / path.length_us if path.length_us > 0 else math.nan
            rows.append((frame.rank, label, total, share))
        per_rank[frame.rank] = values
        timed = np.flatnonzero((path.rows >= 0) & (path.weights > 0))
        by_name: dict[tuple[str, str], float] = {}
        for k in timed.tolist():
            name = frame.names[frame.name[path.rows[k]]]
            key = (name, path.bound_by[k])
            by_name[key] = by_name.get(key, 0.0) + float(path.weights[k])
        top = sorted(by_name.items(), key=lambda kv: -kv[1])[: options.top_kernels]
        events += [(frame.rank, n, b, us) for (n, b), us in top]
    return AnalysisResult(
        "critical_path",
        (
            Table(
                "critical_path_summary",
                ("rank", "bound_by", "duration_us", "share_pct"),
                tuple(rows),
            ),
            Table(
                "critical_path_top_events",
                ("rank", "name", "bound_by", "duration_us"),
                tuple(events),
            ),
        ),
        per_rank,
        tuple(notes),
    )
