"""The dependency graph of HTA's critical path analysis (critical_path.py holds the algorithm in
its docstring, the path and the report): nodes, CPU call-stack edges, GPU launch/kernel/sync
edges, and networkx's `dag_longest_path` over them.

Edges are built as numpy arrays, in the order HTA adds them (it decides which duplicate pair and
which tied predecessor networkx keeps). The longest path is one sequential pass over the nodes
in topological order, run by the C extension (`_kineto_columns.longest_path`), as are the
call-stack walk and the edge pairs (no Python twins: pyproject.toml).
"""

from __future__ import annotations

import math

import numpy as np

from analyzers.traces import _kineto_columns as _c
from analyzers.traces.analyses.queue_length import launch_changes
from analyzers.traces.frame import I64, Mask, RankFrame
from analyzers.traces.stats import time_lexsort

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
    over the whole rank: +1 at a launch on its kernel's stream, -1 at the kernel's start. The
    change points (32 bits each) are kept in the frame's memo, which a spilled rank keeps too:
    the path over HTA's window and the what-if's both read them."""
    if "queue changes" not in frame.memo:
        frame.memo["queue changes"] = _queue_changes(frame)
    rows, levels = frame.memo["queue changes"]
    out = np.full(len(frame), math.nan)
    out[rows] = levels
    return out


def _queue_changes(frame: RankFrame) -> tuple[np.ndarray, np.ndarray]:
    """The change points' rows and the queue length after each."""
    r, ops, delta = launch_changes(frame)
    if not len(r):
        return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32)
    streams = frame.stream[ops]
    order = np.argsort(frame.sort_key(frame.ts[r]), kind="stable")
    order = order[np.argsort(streams[order], kind="stable")]  # by stream, in time order
    s, d = streams[order], np.asarray(delta, dtype=np.int64)[order]
    level = np.cumsum(d)
    first = np.flatnonzero(np.concatenate([[True], s[1:] != s[:-1]]))  # each stream's first
    level -= np.repeat(level[first] - d[first], np.diff([*first, len(order)]))  # sum before it
    return r[order].astype(np.int32), level.astype(np.int32)


def kept_rows(frame: RankFrame, start: float, end: float) -> np.ndarray:
    in_window = (frame.stream == -1) & (frame.ts >= start) & (frame.ts <= end) & (frame.dur > 0)
    keep = in_window.copy()
    gpu_rows = frame.linked_rows(np.flatnonzero(in_window & (frame.index_correlation >= 0)))
    gpu_rows = gpu_rows[gpu_rows >= 0]
    keep[gpu_rows[frame.stream[gpu_rows] != -1]] = True
    keep |= (frame.stream != -1) & (frame.name == frame.sym("Stream Wait Event"))
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
        self.node_row = np.concatenate([node_rows, node_rows])[order].astype(np.int64)
        self.node_ts = ts[order]
        position = np.empty(2 * n, dtype=np.int64)
        position[order] = np.arange(2 * n)
        # Node of each frame row's start and end (-1: the row is not a node).
        self.start_of = np.full(len(frame), -1, dtype=np.int64)
        self.end_of = np.full(len(frame), -1, dtype=np.int64)
        self.start_of[node_rows] = position[:n]
        self.end_of[node_rows] = position[n:]
        self.blocking = frame.name_in(BLOCKING_SYNC_CALLS)
        self._blocks: list[tuple[I64, I64, I64, np.ndarray, I64]] = []
        self.src = self.dst = self.kind = self.attr = np.zeros(0, dtype=np.int64)
        self.weight = np.zeros(0)

    def add(self, u: I64, v: I64, kind: I64, attr: I64, zero: Mask | None = None) -> None:
        """Edges u[i] -> v[i] in order; weight the time between the nodes (0 where `zero`, and for
        dependency and sync edges). A node index of -1 reads the last node, as HTA's does."""
        no_time = (kind == DEPENDENCY) | (kind == SYNC)
        if zero is not None:
            no_time |= zero
        weight = np.where(no_time, 0.0, self.node_ts[v] - self.node_ts[u]) if len(u) else u * 0.0
        self._blocks.append((u, v, kind, weight, attr))

    def cpu_thread(self, rows: np.ndarray) -> None:
        """One thread's rows (sorted) nested into a call stack and walked depth-first.

        With HTA's stack (each start's parent is the top; an end pops the top whatever it is) a
        node's descendants are the starts between its push and its pop, so the starts in event
        order are the depth-first preorder: the walk enters the i-th start (depth d) as its
        2i - d-th step, and leaves it just before the first start after its pop (j starts in) as
        its 2j - d - 1-th. Consecutive nodes of the walk are linked by operator edges, one
        top-level operator's end and the next's start by a dependency edge."""
        f = self.frame
        ts, dur, idx = f.ts[rows], np.maximum(f.dur[rows], 0), f.index[rows]
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
        # The walk in the C extension (an end pops the top whatever it is, nothing on an empty
        # stack): per step the start entered, or n + the start left; per start its parent.
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
        attr = np.where(enter[:-1], row[:-1], np.where(~enter[1:], row[1:], par[:-1]))
        attr = np.where(dependency, -1, attr)
        kind = np.where(dependency, DEPENDENCY, OPERATOR)
        self.add(u, v, kind, attr, zero=~enter[1:] & self.blocking[row[1:]])

    def gpu(self, rows: np.ndarray, queue: np.ndarray) -> None:
        """GPU rows in start order (syncs at their end): each kernel's span, then a launch edge
        when its launch found an empty queue and an idle stream, else a kernel-kernel edge from
        the previous kernel on its stream; a `Stream Sync`/`Context Sync` links the last kernel
        of its stream (of every stream, in order of their first kernel) to the call's end."""
        f = self.frame
        syncs = {f.sym("Event Sync"), f.sym("Context Sync")}
        sync_cat = f.sym("cuda_sync")
        sel = rows[
            ((f.stream[rows] != -1) | np.isin(f.name[rows], np.array(sorted(syncs))))
            & (f.index_correlation[rows] >= 0)
        ]
        is_sync = f.cat[sel] == sync_cat
        sel = sel[np.argsort(np.where(is_sync, f.end[sel], f.ts[sel]), kind="stable")]
        is_sync = f.cat[sel] == sync_cat
        runtime = f.linked_rows(sel)
        # Kernels: position in `sel`, stream, nodes, and the previous kernel on the stream.
        at = np.flatnonzero(~is_sync)
        krow, rt = sel[at], runtime[at]
        stream = f.stream[krow]
        by_stream = np.argsort(stream, kind="stable")
        has_prev = np.zeros(len(at), dtype=bool)
        prev = np.full(len(at), -1, dtype=np.int64)
        same = stream[by_stream[1:]] == stream[by_stream[:-1]]
        has_prev[by_stream[1:][same]] = True
        s, e = self.start_of[krow], self.end_of[krow]
        prev[by_stream[1:][same]] = e[by_stream[:-1][same]]
        rt_ts = np.where(rt >= 0, f.ts[rt], math.nan)
        launch = (rt >= 0) & (queue[rt] == 1) & (queue[krow] == 0)
        launch &= ~has_prev | (self.node_ts[prev] < rt_ts)
        rt_start = self.start_of[rt]
        missing = np.flatnonzero(launch & (rt_start < 0))
        if len(missing):
            row = krow[missing[0]]
            raise CriticalPathError(
                f"no runtime node for the launch of {f.names[f.name[row]]!r} "
                f"(correlation {int(f.correlation[row])})"
            )
        follow = ~launch & has_prev
        second = launch | follow
        blocks = [
            (at, 0, s, e, np.full(len(at), OPERATOR), krow),
            (at[second], 1, np.where(launch, rt_start, prev)[second], s[second],
             np.where(launch, LAUNCH, KERNEL_KERNEL)[second],
             np.where(launch, -1, self.node_row[prev])[second]),
        ]  # fmt: skip
        # Syncs: the last kernel before them on their stream, or on every stream.
        stream_sync, context_sync = f.sym("Stream Sync"), f.sym("Context Sync")
        name = f.name[sel]
        target = np.where(runtime >= 0, self.end_of[runtime], -1)
        waits = is_sync & (runtime >= 0) & (target >= 0)
        streams, first_at = np.unique(stream, return_index=True)
        streams = streams[np.argsort(first_at, kind="stable")]  # the order they first appear
        for i, sid in enumerate(streams.tolist()):
            on = by_stream[stream[by_stream] == sid]  # this stream's kernels, in order
            asks = np.flatnonzero(waits & ((name == context_sync) | (
                (name == stream_sync) & (f.stream[sel] == sid))))  # fmt: skip
            j = np.searchsorted(at[on], asks) - 1
            asks, j = asks[j >= 0], j[j >= 0]
            blocks.append((asks, 2 + i, e[on[j]], target[asks], np.full(len(asks), SYNC),
                           np.full(len(asks), -1)))  # fmt: skip
        pos = np.concatenate([b[0] for b in blocks])
        sub = np.concatenate([np.full(len(b[0]), b[1]) for b in blocks])
        order = np.lexsort((sub, pos))
        u, v, kind, attr = (np.concatenate([b[i] for b in blocks])[order] for i in range(2, 6))
        self.add(u.astype(np.int64), v.astype(np.int64), kind, attr.astype(np.int64))

    def implied_syncs(self, rows: np.ndarray) -> None:
        """Native mode, for traces without `cuda_sync` rows (PyTorch before 2.1): a blocking call
        (`cudaStreamSynchronize`, `cudaMemcpy`, ...) returned when the GPU work it waited for
        did: a sync edge from the last GPU op ending inside the call to the call's end."""
        f = self.frame
        is_node = self.start_of[rows] >= 0
        gpu = rows[(f.stream[rows] != -1) & is_node]
        calls = rows[(f.stream[rows] == -1) & is_node & self.blocking[rows]]
        if not len(gpu) or not len(calls):
            return
        gpu = gpu[np.argsort(f.end[gpu], kind="stable")]
        ends = f.end[gpu]
        k = np.searchsorted(ends, f.end[calls], side="right") - 1
        ok = k >= 0
        ok[ok] = ends[k[ok]] > f.ts[calls[ok]]
        calls, k = calls[ok], k[ok]
        self.add(self.end_of[gpu[k]], self.end_of[calls], np.full(len(k), SYNC),
                 np.full(len(k), -1))  # fmt: skip

    def _edges(self) -> None:
        """Every edge as added, then one per (u, v) pair, as networkx keeps: at the place the
        pair was first added, with the kind, weight and attribution of the last one."""
        if self._blocks:
            src, dst, kind, weight, attr = (
                np.concatenate([b[i] for b in self._blocks]) for i in range(5)
            )
            self._blocks = []
            # Per distinct pair, in order of its first edge: that edge's id and its last's (C).
            pairs = (np.ascontiguousarray(a, np.int64) for a in (src, dst))
            ids = _c.unique_edges(len(self.node_ts), *pairs)
            first, last = (np.frombuffer(a, np.int64) for a in ids)
            self.src, self.dst = src[first], dst[first]
            self.kind, self.weight, self.attr = kind[last], weight[last], attr[last]

    def longest_path(self) -> I64:
        """Edge ids of networkx's `dag_longest_path` (weights <= -1 as 0); raises on a cycle.
        The C pass takes the nodes in Kahn's order; a node's distance is its best predecessor's
        plus the edge (the first best in edge order), 0 when none or negative; the path ends at
        the first node of the greatest distance."""
        self._edges()
        weight = np.where(self.weight <= -1, 0.0, self.weight)
        path = _c.longest_path(len(self.node_ts), self.src, self.dst, weight)
        if path is None:
            raise CriticalPathError("the dependency graph has a cycle")
        return np.frombuffer(path, dtype=np.int64)
