"""The replay engine of the what-if estimates (whatif.py): one rank's dependency structure,
replayed with one `Change` applied, giving the new mean step time. The model:
- CPU: events keep their order on one global clock. A `Change` multiplies the time of some
  intervals by a factor (0 removes a data-loader wait, 0.1 keeps a tenth of a launch under a CUDA
  graph) and of all the rest by one factor (the main thread slowed by other processes);
  everything after a warped interval moves by the difference.
- Launch -> kernel: a GPU op starts at `max(new launch time + its launch latency, end of the
  previous op on its stream)`, the latency being the part of its original start delay not spent
  waiting for that op (capped under CUDA graphs); durations change only by a factor per op.
- Sync: a blocking call (`cudaDeviceSynchronize`, `cudaStreamSynchronize`, sync memcpy, ...)
  returns at `max(start + overhead, end of all GPU work launched before it)`.
- Step time: over the ProfilerStep ranges, `max(CPU end, GPU end) - start`, divided by the steps;
  a CPU-only trace replays its CPU clock alone.

No loop per event (a what-if table replays each rank some 25 times): only a sync is sequential,
moving every later event by one constant. Between two syncs (a segment) the warped clock is array
arithmetic, and per stream `end = max(start, previous end) + dur` has the closed form `end_i = C_i
+ max(free - C_before, S + max_{j<=i}(start_j - C_{j-1}))` (`C`: the running sum of durations on
the stream, `S`: the syncs' shift so far). Python steps once per (stream, segment) group and per
sync. Results equal the event-by-event replay up to float rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple, TypeVar, cast

import numpy as np

from analyzers.traces.analyses.base import TraceOptions
from analyzers.traces.analyses.pageable_memcpy import is_pageable
from analyzers.traces.analyses.steps import steps_or_span
from analyzers.traces.analyses.sync import SYNC_CALLS
from analyzers.traces.frame import F64, I64, RUNTIME_CATS, Mask, RankFrame
from analyzers.traces.stats import time_lexsort

T = TypeVar("T")


class Change(NamedTuple):
    """One thing changed. `cpu_warp`: sorted, non-overlapping CPU intervals (start, end, factor)
    whose time is multiplied by factor; `cpu_scale`: the factor for every other CPU interval;
    `gpu_factor`: a duration factor per replayed GPU op (`Replay.gpu` order)."""

    cpu_warp: tuple[F64, F64, F64] | None = None
    cpu_scale: float = 1.0
    sync_costs_overhead: bool = False
    pinned: bool = False
    gpu_factor: F64 | None = None
    latency_cap_us: float = math.inf

    def key(self) -> tuple[object, ...]:
        """Equal for two changes that replay alike (the arrays by content): the memo key."""
        arrays = (*(self.cpu_warp or ()), self.gpu_factor)
        data = (None if a is None else np.asarray(a, np.float64).tobytes() for a in arrays)
        return *data, *self[1:4], self.latency_cap_us


def outermost(start: F64, end: F64) -> tuple[F64, F64]:
    """The intervals not inside an earlier one, sorted (nested ops are warped once, by their
    outermost row); a partial overlap extends the earlier interval."""
    order = time_lexsort((-end, start))
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(np.concatenate([[-np.inf], e]))[:-1]  # the latest end before
    first = np.flatnonzero(s >= reach)
    return s[first], np.maximum.reduceat(e, first)


def grouped_cummax(values: F64, group: I64) -> F64:
    """Running maximum restarting at each group (`group` non-decreasing), exact: numpy's complex
    maximum is lexicographic on (real = group, imag = value), so no float offset rounds and
    nothing sorts. NaNs would carry across groups there: they go through integer keys."""
    n = len(values)
    if not np.isnan(values).any():
        pairs = np.empty(n, dtype=np.complex128)  # set part by part: 1j * inf has a NaN part
        pairs.real = group
        pairs.imag = values
        return np.maximum.accumulate(pairs).imag.copy()
    order = np.argsort(values, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n, dtype=np.int64)
    base = group.astype(np.int64) * n
    return values[order[np.maximum.accumulate(base + rank) - base]]


class Replay:
    """The dependency structure of one rank, ready to replay under a `Change`."""

    def __init__(self, frame: RankFrame, options: TraceOptions) -> None:
        self.frame = frame
        self.options = options
        self._derived: dict[object, object] = {}
        self.steps = steps = steps_or_span(frame)  # the what-if's interval reads their spread
        self.start, self.end = (steps[0].start_us, steps[-1].end_us) if steps else (0.0, 0.0)
        self.n_steps = len(steps)
        cpu = frame.stream == -1
        launch = np.flatnonzero(frame.cat_in(RUNTIME_CATS) & (frame.index_correlation >= 0))
        gpu_row = frame.linked_rows(launch)
        keep = (gpu_row >= 0) & frame.gpu_op[np.maximum(gpu_row, 0)]
        self.launch, self.gpu = launch[keep], gpu_row[keep]
        self.has_gpu = bool(len(self.launch))
        self.sync = np.flatnonzero(frame.name_in(SYNC_CALLS) & cpu)
        self.launch_ts, self.launch_dur = frame.ts[self.launch], frame.dur[self.launch]
        self.sync_ts, self.sync_dur = frame.ts[self.sync], frame.dur[self.sync]
        self.gpu_dur, self.gpu_stream = frame.dur[self.gpu], frame.stream[self.gpu]
        self.gpu_pageable = frame.names_matching(is_pageable)[self.gpu]
        self.latency = self._latency()
        self._order_events()
        # The times every replay warps, in one array: the step range, then the events.
        self.clock_times = np.concatenate([[self.start, self.end], self.launch_ts, self.sync_ts])

    def _latency(self) -> F64:
        """Launch latency: the part of each op's start delay not spent waiting for the previous
        op on its stream (ops in start order; 'previous' = the latest end so far)."""
        g_ts, g_end = self.frame.ts[self.gpu], self.frame.end[self.gpu]
        ready = self.launch_ts.copy()
        order = np.lexsort((g_ts, self.gpu_stream))  # by stream, in start order
        stream = self.gpu_stream[order]
        latest = grouped_cummax(g_end[order], stream)
        later = np.flatnonzero(stream[1:] == stream[:-1]) + 1  # not a stream's first op
        ready[order[later]] = np.maximum(ready[order[later]], latest[later - 1])
        return np.maximum(0.0, g_ts - ready)

    def _order_events(self) -> None:
        """Launches and syncs in event order (time, launches first, then index), each launch's
        segment (syncs before it), and the launches grouped by (stream, segment)."""
        n_l, n_s = len(self.launch), len(self.sync)
        # Launch i is event i, sync k is event n_l + k: a stable sort puts launches first on ties.
        self.event_order = np.argsort(np.concatenate([self.launch_ts, self.sync_ts]), kind="stable")
        self.sync_order = np.argsort(self.sync_ts, kind="stable")  # syncs in event order
        segment = np.searchsorted(self.sync_ts[self.sync_order], self.launch_ts)  # syncs before
        perm = np.lexsort((self.launch_ts, segment, self.gpu_stream))
        self.perm = perm  # launches by (stream, segment, event order)
        g_stream, g_seg = self.gpu_stream[perm], segment[perm]
        new = np.ones(n_l, dtype=bool)
        new[1:] = (g_stream[1:] != g_stream[:-1]) | (g_seg[1:] != g_seg[:-1])
        self.group_start = np.flatnonzero(new)
        self.group_last = np.append(self.group_start[1:], n_l)[: len(self.group_start)] - 1
        self.group_of = np.cumsum(new) - 1
        self.group_stream = g_stream[self.group_start].tolist()
        by_segment: list[list[tuple[int, int]]] = [[] for _ in range(n_s + 1)]
        for g, seg in enumerate(g_seg[self.group_start].tolist()):
            by_segment[seg].append((g, self.group_stream[g]))
        self.groups_by_segment = by_segment  # per segment, its groups and their streams
        self.in_window = (self.launch_ts < self.end)[perm]

    def _durations(
        self, dur: F64
    ) -> tuple[F64, F64, list[float], list[float], list[float], list[float]]:
        """The replay's part that depends on the GPU ops' durations alone."""
        d = dur[self.perm]
        c = np.cumsum(d)  # differences within one stream are the sums of its durations
        c_prev = c - d
        first, last = self.group_start, self.group_last
        return c, c_prev, *self._group_maxima(c), c[last].tolist(), c_prev[first].tolist()

    def _group_maxima(self, c: F64) -> tuple[list[float], list[float]]:
        """Per (stream, segment) group, the largest of `c`, and the largest in the step window."""
        first = self.group_start
        inside = np.where(self.in_window, c, -math.inf)
        return np.maximum.reduceat(c, first).tolist(), np.maximum.reduceat(inside, first).tolist()

    def derived(self, key: object, make: Callable[[], T]) -> T:
        """`make()`, once per replay and key (scenarios' levels and combinations reuse it)."""
        if key not in self._derived:
            self._derived[key] = make()
        return cast(T, self._derived[key])

    def gpu_busy_us(self, change: Change) -> float:
        """GPU time per step under `change` (sum of op durations; streams may overlap)."""
        dur = self.gpu_dur if change.gpu_factor is None else self.gpu_dur * change.gpu_factor
        return float(dur.sum()) / max(1, self.n_steps)

    def step_time(self, change: Change) -> float:
        """Mean replayed step time (us) under `change`, memoised by the change's content."""
        return self.derived(("step time", *change.key()), lambda: self._step_time(change))

    def cpu_clock(self, change: Change, t: F64) -> F64:
        """The warped, scaled CPU clock of `change` at times `t`."""
        warped = t
        if change.cpu_warp is not None and len(change.cpu_warp[0]):
            w_start, w_end, w_fac = change.cpu_warp
            w_add = (w_end - w_start) * (w_fac - 1.0)
            w_cum = np.concatenate([[0.0], np.cumsum(w_add)])  # time added before each one
            j, after, into = self._warp_slots(w_start, w_end, t)
            inside = into * (w_fac[j] - 1.0)
            warped = t + np.where(after, w_cum[j] + inside, 0.0)
        return self.start + (warped - self.start) * change.cpu_scale

    def _warp_slots(self, w_start: F64, w_end: F64, t: F64) -> tuple[I64, Mask, F64]:
        """Per time, the last interval starting at or before it (0 if none), whether there is
        one, and the time spent in it so far; memoised by the arrays' ids (the workers' fixed
        point replays one set of intervals at many factors; bytes are slow to hash)."""

        def find() -> tuple[tuple[F64, F64, F64], tuple[I64, Mask, F64]]:
            k = np.searchsorted(w_start, t, side="right")
            j = np.maximum(k - 1, 0)
            return (t, w_start, w_end), (j, k > 0, np.minimum(t, w_end[j]) - w_start[j])

        # The arrays are held with their slots, so no id is reused while cached.
        return self.derived(("slots", id(t), id(w_start), id(w_end)), find)[1]

    def _step_time(self, change: Change) -> float:
        o = self.options
        if self.n_steps == 0:
            return math.nan
        scale = change.cpu_scale
        n_l = len(self.launch)
        warped = self.cpu_clock(change, self.clock_times)
        ends, clk = warped[:2], warped[2:]
        dur = self.gpu_dur if change.gpu_factor is None else self.gpu_dur * change.gpu_factor
        pin, pin_total = np.zeros(len(clk)), 0.0  # the pinned copies' shift before each event
        if change.pinned:
            dur = np.where(self.gpu_pageable, dur / o.pinned_copy_speedup, dur)
            saved = np.maximum(0.0, self.launch_dur - o.sync_overhead_us) * scale
            step = np.zeros(len(clk))
            step[:n_l] = np.where(self.gpu_pageable, saved, 0.0)
            ordered = step[self.event_order]
            pin[self.event_order] = -(np.cumsum(ordered) - ordered)
            pin_total = -float(ordered.sum())
        base = clk[:n_l] + pin[:n_l] + np.minimum(self.latency, change.latency_cap_us)
        # Per (stream, segment) group, the closed form of end = max(start, free) + dur.
        recorded = dur is self.gpu_dur  # their part is the same every time
        parts = self.derived("durations", lambda: self._durations(dur)) if recorded else None
        c, c_prev, max_a, win_a, last_a, c_first = parts or self._durations(dur)
        cr = c + grouped_cummax(base[self.perm] - c_prev, self.group_of)
        max_b, win_b = self._group_maxima(cr)
        last_b = cr[self.group_last].tolist()
        sync_clk = (clk[n_l:] + pin[n_l:])[self.sync_order].tolist()
        sync_dur = self.sync_dur[self.sync_order].tolist()
        free = {s: -math.inf for s in self.group_stream}
        shift = 0.0  # time the syncs so far added
        gpu_done = last_gpu_end = -math.inf
        for k, groups in enumerate(self.groups_by_segment):
            for g, stream in groups:
                x = free[stream] - c_first[g]
                gpu_done = max(gpu_done, max_a[g] + x, max_b[g] + shift)
                last_gpu_end = max(last_gpu_end, win_a[g] + x, win_b[g] + shift)
                free[stream] = max(last_a[g] + x, last_b[g] + shift)
            if k < len(sync_dur):
                new_t = sync_clk[k] + shift
                sd = sync_dur[k]
                overhead = min(sd, o.sync_overhead_us)
                new_d = overhead if change.sync_costs_overhead else max(overhead, gpu_done - new_t)
                shift += new_d - sd * scale
        cpu_end = float(ends[1]) + shift + pin_total
        return (max(cpu_end, last_gpu_end) - float(ends[0])) / self.n_steps
