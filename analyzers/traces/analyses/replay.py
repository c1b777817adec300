"""The replay engine of the what-if estimates (Daydream, Zhu et al., USENIX ATC'20): one rank's
dependency structure, replayed with one `Change` applied, giving the new mean step time.

The model (stated with every estimate, because an estimate is only as good as it):

- CPU: CPU events keep their order on one global clock. A `Change` may warp CPU time: intervals
  whose time is multiplied by a factor (0 removes it: a data-loader wait; 0.1 keeps a tenth: a
  kernel launch under a CUDA graph; 1.2 stretches it) and one factor for all the rest (the main
  thread slowed by other processes). Everything after a warped interval moves by the difference.
- Launch -> kernel: a GPU op starts at `max(new launch time + its own launch latency, end of the
  previous op on its stream)`; the latency is the part of its original start delay not explained
  by waiting for the previous op on its stream (capped when a change says so: CUDA graphs).
  Kernels keep their durations unless the change gives a factor per op.
- Sync: a blocking call (`cudaDeviceSynchronize`, `cudaStreamSynchronize`, sync memcpy, ...)
  returns at `max(start + overhead, end of all GPU work launched before it)`.
- Step time: over the ProfilerStep ranges, `max(CPU end, GPU end) - start`, divided by the steps.
  A trace with no GPU (a CPU-only run) replays its CPU clock alone.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

from analyzers.traces.analyses.base import TraceOptions
from analyzers.traces.analyses.pageable_memcpy import is_pageable
from analyzers.traces.analyses.steps import profiler_steps
from analyzers.traces.analyses.sync import SYNC_CALLS
from analyzers.traces.frame import F64, GPU_OP_CATS, RUNTIME_CATS, RankFrame

__all__ = ["Change", "Replay", "outermost"]


@dataclass(frozen=True)
class Change:
    """One thing changed. `cpu_warp`: sorted, non-overlapping CPU intervals (start, end, factor)
    whose time is multiplied by factor; `cpu_scale`: the factor for every other CPU interval;
    `gpu_factor`: a duration factor per replayed GPU op (`Replay.gpu` order)."""

    cpu_warp: tuple[F64, F64, F64] | None = None
    cpu_scale: float = 1.0
    sync_costs_overhead: bool = False
    pinned: bool = False
    gpu_factor: F64 | None = None
    latency_cap_us: float = math.inf


def outermost(start: F64, end: F64) -> tuple[F64, F64]:
    """The intervals not inside an earlier one, sorted: nested ops (aten::conv2d holding
    aten::convolution) are warped once, by their outermost row."""
    order = np.lexsort((-end, start))
    keep_s: list[float] = []
    keep_e: list[float] = []
    for s, e in zip(start[order].tolist(), end[order].tolist(), strict=True):
        if keep_e and s < keep_e[-1]:
            if e > keep_e[-1]:  # partial overlap: extend (rows on one thread nest properly)
                keep_e[-1] = e
            continue
        keep_s.append(s)
        keep_e.append(e)
    return np.array(keep_s), np.array(keep_e)


class Replay:
    """The dependency structure of one rank, ready to replay under a `Change`."""

    def __init__(self, frame: RankFrame, options: TraceOptions) -> None:
        self.frame = frame
        self.options = options
        steps = profiler_steps(frame)
        cpu = frame.stream == -1
        self.cpu = cpu
        if steps:
            self.start, self.end, self.n_steps = steps[0].start_us, steps[-1].end_us, len(steps)
        elif cpu.any():
            self.start, self.end, self.n_steps = (
                float(frame.ts[cpu].min()), float(frame.end[cpu].max()), 1,
            )  # fmt: skip
        else:
            self.start = self.end = 0.0
            self.n_steps = 0
        row_of = frame.row_of_index()
        gpu_ok = frame.on_stream & frame.cat_in(GPU_OP_CATS)
        launch = np.flatnonzero(frame.cat_in(RUNTIME_CATS) & (frame.index_correlation >= 0))
        link = frame.index_correlation[launch]
        gpu_row = np.where(link < len(row_of), row_of[np.clip(link, 0, len(row_of) - 1)], -1)
        keep = (gpu_row >= 0) & gpu_ok[np.maximum(gpu_row, 0)]
        self.launch, self.gpu = launch[keep], gpu_row[keep]
        self.sync = np.flatnonzero(frame.name_in(SYNC_CALLS) & cpu)
        pageable = frame.names_matching(is_pageable)
        # Launch latency: the part of each op's start delay not spent waiting for its stream.
        g_ts, g_end = frame.ts[self.gpu], frame.end[self.gpu]
        latency = np.zeros(len(self.gpu))
        order = np.argsort(g_ts, kind="stable")
        prev_end: dict[int, float] = {}
        streams = frame.stream[self.gpu].tolist()
        for i in order.tolist():
            ready = max(float(frame.ts[self.launch[i]]), prev_end.get(streams[i], -math.inf))
            latency[i] = max(0.0, float(g_ts[i]) - ready)
            prev_end[streams[i]] = max(prev_end.get(streams[i], -math.inf), float(g_end[i]))
        # Plain Python lists: the replay is a sequential loop, and list access is 10x cheaper
        # than numpy scalar access.
        points = [(float(t), 0, i) for i, t in enumerate(frame.ts[self.launch].tolist())]
        points += [(float(t), 1, i) for i, t in enumerate(frame.ts[self.sync].tolist())]
        points.sort()
        self.points = points
        self.sync_dur = frame.dur[self.sync].tolist()
        self.launch_dur = frame.dur[self.launch].tolist()
        self.gpu_dur = frame.dur[self.gpu].tolist()
        self.gpu_stream = frame.stream[self.gpu].tolist()
        self.gpu_pageable = pageable[self.gpu].tolist()
        self.latency_list = latency.tolist()

    @property
    def has_gpu(self) -> bool:
        return bool(len(self.launch))

    def gpu_busy_us(self, change: Change) -> float:
        """GPU time per step under `change` (sum of op durations; streams may overlap)."""
        dur = np.asarray(self.gpu_dur)
        if change.gpu_factor is not None:
            dur = dur * change.gpu_factor
        return float(dur.sum()) / max(1, self.n_steps)

    def step_time(self, change: Change) -> float:
        """Mean replayed step time (us) under `change`."""
        o = self.options
        if self.n_steps == 0:
            return math.nan
        w_start: list[float] = []
        w_end: list[float] = []
        w_fac: list[float] = []
        if change.cpu_warp is not None:
            w_start, w_end = change.cpu_warp[0].tolist(), change.cpu_warp[1].tolist()
            w_fac = change.cpu_warp[2].tolist()
        w_cum = [0.0]  # time added (negative: removed) by the intervals before each one
        for a, b, f in zip(w_start, w_end, w_fac, strict=True):
            w_cum.append(w_cum[-1] + (b - a) * (f - 1.0))
        scale = change.cpu_scale

        def added_before(t: float) -> float:
            k = bisect.bisect_right(w_start, t)
            if k == 0:
                return 0.0
            a, b, f = w_start[k - 1], w_end[k - 1], w_fac[k - 1]
            return w_cum[k - 1] + (min(t, b) - a) * (f - 1.0)

        def clock(t: float) -> float:
            warped = t + added_before(t) if w_start else t
            return self.start + (warped - self.start) * scale

        gpu_factor = change.gpu_factor.tolist() if change.gpu_factor is not None else None
        cap = change.latency_cap_us
        shift = 0.0
        stream_free: dict[int, float] = {}
        gpu_done = -math.inf
        last_gpu_end = -math.inf
        window_end = self.end
        gpu_dur, gpu_stream, latency = self.gpu_dur, self.gpu_stream, self.latency_list
        for t, kind, i in self.points:
            new_t = clock(t) + shift
            if kind == 0:
                dur = gpu_dur[i]
                if gpu_factor is not None:
                    dur *= gpu_factor[i]
                if change.pinned and self.gpu_pageable[i]:
                    dur /= o.pinned_copy_speedup
                    shift -= max(0.0, self.launch_dur[i] - o.sync_overhead_us) * scale
                stream = gpu_stream[i]
                lat = latency[i]
                start = new_t + (lat if lat < cap else cap)
                free = stream_free.get(stream, -math.inf)
                end = (start if start > free else free) + dur
                stream_free[stream] = end
                if end > gpu_done:
                    gpu_done = end
                if t < window_end and end > last_gpu_end:
                    last_gpu_end = end
            else:
                d = self.sync_dur[i]
                overhead = min(d, o.sync_overhead_us)
                new_d = overhead if change.sync_costs_overhead else max(overhead, gpu_done - new_t)
                shift += new_d - d * scale
        cpu_end = clock(self.end) + shift
        return (max(cpu_end, last_gpu_end) - clock(self.start)) / self.n_steps
