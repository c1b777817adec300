"""The dependency graph of HTA's critical path analysis (critical_path.py holds the algorithm in
its docstring, the path and the report): nodes, CPU call-stack edges, GPU launch/kernel/sync
edges, and networkx's `dag_longest_path` over them. Per-edge work is Python over lists (a graph
has one edge per event and the longest path is sequential); arrays where a step is whole-rank.
"""

from __future__ import annotations

import math
from array import array
from collections import deque

import numpy as np

from analyzers.traces.analyses.queue_length import RUNTIME_LAUNCHES
from analyzers.traces.frame import RankFrame
from analyzers.traces.stats import isin

__all__ = [
    "DEPENDENCY",
    "KERNEL_KERNEL",
    "LAUNCH",
    "OPERATOR",
    "SYNC",
    "CriticalPathError",
    "Graph",
]

OPERATOR, DEPENDENCY, LAUNCH, KERNEL_KERNEL, SYNC = 0, 1, 2, 3, 4
_NO_TIME = frozenset({DEPENDENCY, SYNC})
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


class CriticalPathError(Exception):
    """HTA would not answer (its assertion on a launch without a runtime node)."""


def queue_lengths(frame: RankFrame) -> np.ndarray:
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


def kept_rows(frame: RankFrame, start: float, end: float) -> np.ndarray:
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


class Graph:
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
        # Python lists for the per-edge work (a numpy scalar read costs ~10x a list's).
        self.ts_list: list[float] = self.node_ts.tolist()
        self.start_list: list[bool] = self.node_start.tolist()
        self.row_list: list[int] = self.node_row.tolist()
        # Edges as typed arrays and their (u, v) keys as one int: a rank's every-step graph
        # holds millions of edges, and Python lists of boxed numbers and tuple keys made it
        # the peak of a whole multi-rank command (issue 29, bench/RESULTS.md).
        self.src = array("q")
        self.dst = array("q")
        self.kind = array("q")
        self.weight = array("d")
        self.attr = array("q")
        self._nodes = 2 * n
        self.edge_at: dict[int, int] = {}

    def add(self, u: int, v: int, kind: int, attr: int = -1, zero: bool = False) -> None:
        w = 0.0 if zero or kind in _NO_TIME else self.ts_list[v] - self.ts_list[u]
        key = u * self._nodes + v
        i = self.edge_at.get(key)
        if i is not None:  # networkx keeps one edge per pair: the last one added
            self.kind[i], self.weight[i], self.attr[i] = kind, w, attr
            return
        self.edge_at[key] = len(self.src)
        self.src.append(u)
        self.dst.append(v)
        self.kind.append(kind)
        self.weight.append(w)
        self.attr.append(attr)

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
        if self.start_list[u]:
            attr = self.row_list[u]
        elif not self.start_list[v]:
            attr = self.row_list[v]
        else:
            attr = src_parent
        self.add(u, v, OPERATOR, attr, zero)

    def gpu(self, rows: np.ndarray, queue: np.ndarray) -> None:
        f = self.frame
        syncs = {f.sym("Event Sync"), f.sym("Context Sync")}
        sync_cat = f.sym("cuda_sync")
        sel = rows[
            ((f.stream[rows] != -1) | isin(f.name[rows], np.array(sorted(syncs))))
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
                and (prev is None or self.ts_list[prev] < runtime_ts)
            ):
                start = self.start_of.get(runtime)
                if start is None:
                    raise CriticalPathError(
                        f"no runtime node for the launch of {f.names[f.name[row]]!r} "
                        f"(correlation {int(f.correlation[row])})"
                    )
                self.add(start, s, LAUNCH)
            elif prev is not None:
                self.add(prev, s, KERNEL_KERNEL, self.row_list[prev])
            last[stream] = e

    def implied_syncs(self, rows: np.ndarray) -> None:
        """Native mode, for traces without `cuda_sync` rows (PyTorch before 2.1): a blocking call
        (`cudaStreamSynchronize`, `cudaMemcpy`, ...) returned when the GPU work it waited for
        did: a sync edge from the last GPU op ending inside the call to the call's end."""
        f = self.frame
        gpu = rows[(f.stream[rows] != -1) & isin(rows, np.array(sorted(self.start_of)))]
        calls = rows[(f.stream[rows] == -1) & isin(rows, np.array(sorted(self.blocking)))]
        calls = calls[isin(calls, np.array(sorted(self.end_of)))]
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
        src = np.frombuffer(self.src, dtype=np.int64) if len(self.src) else np.zeros(0, np.int64)
        dst = np.frombuffer(self.dst, dtype=np.int64) if len(self.dst) else np.zeros(0, np.int64)
        # Each node's incoming edge ids and outgoing targets in the order the edges were added
        # (a stable sort), as one flat list and offsets instead of a list per node.
        pred_ids: list[int] = np.argsort(dst, kind="stable").tolist()
        pred_at: list[int] = (
            np.searchsorted(
                dst, np.arange(n + 1), sorter=np.asarray(pred_ids, dtype=np.int64)
            ).tolist()
            if n
            else [0]
        )
        by_src = np.argsort(src, kind="stable")
        succ_ids: list[int] = dst[by_src].tolist()
        succ_at: list[int] = (
            np.searchsorted(src, np.arange(n + 1), sorter=by_src).tolist() if n else [0]
        )
        del by_src
        indeg: list[int] = np.bincount(dst, minlength=n).tolist()
        src_list: list[int] = src.tolist()
        w = [0.0 if x <= -1 else x for x in self.weight]
        ready = deque(k for k in range(n) if indeg[k] == 0)
        dist = [0.0] * n
        via = [-1] * n
        seen = 0
        while ready:
            v = ready.popleft()
            seen += 1
            best, best_edge = 0.0, -1
            for i in pred_ids[pred_at[v] : pred_at[v + 1]]:
                cand = dist[src_list[i]] + w[i]
                if best_edge < 0 or cand > best:
                    best, best_edge = cand, i
            if best_edge >= 0 and best >= 0:
                dist[v], via[v] = best, best_edge
            for x in succ_ids[succ_at[v] : succ_at[v + 1]]:
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
