"""The dependency graph of HTA's critical path analysis (critical_path.py holds the algorithm in
its docstring, the path and the report): nodes, CPU call-stack edges, GPU launch/kernel/sync
edges, and networkx's `dag_longest_path` over them. Per-edge work is Python over typed arrays (a
graph has one edge per event and the longest path is sequential); numpy where a step is whole-rank.
"""

from __future__ import annotations

import math
from array import array
from collections import deque

import numpy as np

from analyzers.traces.analyses.queue_length import launch_changes
from analyzers.traces.frame import I64, RankFrame

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
    r, ops, delta = launch_changes(frame)
    streams = frame.stream[ops].tolist()
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
        # Node of each frame row's start and end (-1: the row is not a node), the per-node
        # values the per-edge Python work reads, and the edges: typed arrays, not dicts and
        # lists of boxed numbers, which made a rank's every-step graph the peak of a whole
        # multi-rank command (issue 29, bench/RESULTS.md). An array item reads as fast as a
        # list's and costs 8 bytes, not 8 plus a 24-32 byte object.
        start_of = np.full(len(frame), -1, dtype=np.int64)
        end_of = np.full(len(frame), -1, dtype=np.int64)
        start_of[node_rows] = position[:n]
        end_of[node_rows] = position[n:]
        del position
        self.start_of = array("q", start_of.tobytes())
        self.end_of = array("q", end_of.tobytes())
        self.blocking = set(np.flatnonzero(frame.name_in(BLOCKING_SYNC_CALLS)).tolist())
        self.ts_list = array("d", self.node_ts.tobytes())
        self.start_list = array("b", self.node_start.astype(np.int8).tobytes())
        self.row_list = array("q", self.node_row.astype(np.int64).tobytes())
        # Every edge as added; `_edges` keeps one per (u, v) pair, as networkx does.
        self.src = array("q")
        self.dst = array("q")
        self.kind = array("q")
        self.weight = array("d")
        self.attr = array("q")
        self._nodes = 2 * n

    def add(self, u: int, v: int, kind: int, attr: int = -1, zero: bool = False) -> None:
        self.src.append(u)
        self.dst.append(v)
        self.kind.append(kind)
        self.weight.append(0.0 if zero or kind in _NO_TIME else self.ts_list[v] - self.ts_list[u])
        self.attr.append(attr)

    def _edges(self) -> tuple[I64, I64]:
        """Keep one edge per (u, v) pair, as networkx does: at the place the pair was first
        added, with the kind, weight and attribution of the last one. Returns (src, dst)."""
        src = np.frombuffer(self.src, dtype=np.int64) if len(self.src) else np.zeros(0, np.int64)
        dst = np.frombuffer(self.dst, dtype=np.int64) if len(self.dst) else np.zeros(0, np.int64)
        key = src * self._nodes + dst
        by_key = np.argsort(key, kind="stable")
        sorted_key = key[by_key]
        del key
        new = np.ones(len(sorted_key) + 1, dtype=bool)
        new[1:-1] = sorted_key[1:] != sorted_key[:-1]
        del sorted_key
        first, last = by_key[new[:-1]], by_key[new[1:]]
        del by_key, new
        if len(first) < len(src):
            at = np.argsort(first, kind="stable")
            first, last = first[at], last[at]
            src, dst = src[first], dst[first]
            self.src, self.dst = array("q", src.tobytes()), array("q", dst.tobytes())
            for name, code in (("kind", "q"), ("weight", "d"), ("attr", "q")):
                values = np.frombuffer(getattr(self, name), dtype=np.dtype(code))
                setattr(self, name, array(code, values[last].tobytes()))
        return src, dst

    def cpu_thread(self, rows: np.ndarray) -> None:
        """One thread's rows (sorted) nested into a call stack and walked depth-first.

        The walk needs no tree: with HTA's stack (each start's parent is the top; an end pops the
        top whatever it is) a node's descendants are the starts between its push and its pop, so
        the starts in event order are the depth-first preorder, and a node is left just before
        the first later start that is not its descendant (or at the end)."""
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
        del t, d, i
        local = array("q", np.concatenate([np.arange(n), np.arange(n)])[order].tobytes())
        starts = array("b", is_start[order].astype(np.int8).tobytes())
        del order, is_start
        row_of = array("q", rows.astype(np.int64).tobytes())
        parent = array("q", bytes(8 * n))
        stack: list[int] = []  # HTA's call stack
        path: list[int] = []  # the walk's: the last node entered and its ancestors
        walk = _Walk(self, row_of, parent)
        for k, s in zip(local, starts, strict=True):
            if s:
                up = stack[-1] if stack else -1
                parent[k] = up
                while path and path[-1] != up:
                    walk.leave(path.pop())
                walk.enter(k)
                path.append(k)
                stack.append(k)
            elif stack:
                stack.pop()
        while path:
            walk.leave(path.pop())

    def cpu_edge(self, u: int, v: int, src_parent: int, zero: bool = False) -> None:
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
            ((f.stream[rows] != -1) | np.isin(f.name[rows], np.array(sorted(syncs))))
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
                    target = self.end_of[runtime]
                    for node in ends:
                        if node is not None and target >= 0:
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
                start = self.start_of[runtime]
                if start < 0:
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
        is_node = np.frombuffer(self.start_of, dtype=np.int64)[rows] >= 0
        gpu = rows[(f.stream[rows] != -1) & is_node]
        calls = rows[(f.stream[rows] == -1) & is_node & f.name_in(BLOCKING_SYNC_CALLS)[rows]]
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
        src, dst = self._edges()
        # Each node's incoming edge ids and outgoing targets in the order the edges were added
        # (a stable sort), flat with offsets (CSR), as typed arrays for the sequential pass.
        by_dst = np.argsort(dst, kind="stable")
        pred_at = array("q", np.searchsorted(dst, np.arange(n + 1), sorter=by_dst).tobytes())
        pred_ids = array("q", by_dst.tobytes())
        del by_dst
        by_src = np.argsort(src, kind="stable")
        succ_ids = array("q", dst[by_src].tobytes())
        succ_at = array("q", np.searchsorted(src, np.arange(n + 1), sorter=by_src).tobytes())
        del by_src
        indeg = array("q", np.bincount(dst, minlength=n).astype(np.int64).tobytes())
        weight = np.frombuffer(self.weight, dtype=np.float64) if len(self.weight) else np.zeros(0)
        w = array("d", np.where(weight <= -1, 0.0, weight).tobytes())
        src_of = self.src
        ready = deque(np.flatnonzero(np.frombuffer(indeg, dtype=np.int64) == 0).tolist())
        dist = array("d", bytes(8 * n))
        via = array("q", np.full(n, -1, dtype=np.int64).tobytes())
        seen = 0
        while ready:
            v = ready.popleft()
            seen += 1
            best, best_edge = 0.0, -1
            for i in pred_ids[pred_at[v] : pred_at[v + 1]]:
                cand = dist[src_of[i]] + w[i]
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
        v = int(np.argmax(np.frombuffer(dist, dtype=np.float64)))  # the first longest
        path: list[int] = []
        while via[v] >= 0:
            path.append(via[v])
            v = src_of[via[v]]
        return path[::-1]


class _Walk:
    """The depth-first walk of one thread's call stack (module docstring of critical_path.py,
    step 3): consecutive nodes linked by operator edges, top-level operators by dependencies."""

    def __init__(self, graph: Graph, rows: array[int], parent: array[int]) -> None:
        self.graph, self.rows, self.parent = graph, rows, parent
        self.last: int | None = None
        self.last_top: int | None = None
        self.last_parent = -1
        self.depth = 0

    def _nodes(self, k: int) -> tuple[int, int, int, int]:
        row = self.rows[k]
        up = self.parent[k]
        return (
            row,
            self.graph.start_of[row],
            self.graph.end_of[row],
            self.rows[up] if up >= 0 else -1,
        )

    def enter(self, k: int) -> None:
        _, s, e, par = self._nodes(k)
        if s < 0 or e < 0:
            return
        graph = self.graph
        if self.depth == 0 and self.last_top is not None:
            graph.add(self.last_top, s, DEPENDENCY)
        self.depth += 1
        if self.last is not None:
            graph.cpu_edge(self.last, s, self.last_parent)
        self.last, self.last_parent = s, par

    def leave(self, k: int) -> None:
        row, s, e, par = self._nodes(k)
        if s < 0 or e < 0:
            return
        graph = self.graph
        self.depth -= 1
        if self.last is not None:
            graph.cpu_edge(self.last, e, self.last_parent, zero=row in graph.blocking)
        if self.depth == 0:
            self.last, self.last_top = None, e
        else:
            self.last, self.last_parent = e, par
