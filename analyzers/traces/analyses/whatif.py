"""What-if estimates in the spirit of Daydream (Zhu et al., USENIX ATC'20): replay the trace's
dependency structure with one thing changed and read off the new step time.

The model (stated in every result, because the estimate is only as good as it):

- CPU: every CPU event keeps its duration and order, on one global clock: removing time on the
  CPU (a data-loader wait, a sync wait, a blocking pageable copy) moves everything after it
  earlier by that much, on every thread.
- Launch -> kernel: a GPU op starts at `max(new launch time + its own launch latency, end of the
  previous op on its stream)`; the latency is the part of its original start delay not explained
  by waiting for the previous op on its stream. Kernels keep their durations unless changed.
- Sync: a blocking call (`cudaDeviceSynchronize`, `cudaStreamSynchronize`, sync memcpy, ...)
  returns at `max(start + overhead, end of all GPU work launched before it)`, so a faster GPU
  shortens the wait and a slower one lengthens it.
- Step time: over the ProfilerStep ranges, `max(CPU end, GPU end) - start`, divided by the steps;
  the baseline is the same replay with nothing changed (so model error cancels).

Scenarios: `no_dataloader_wait` (remove `enumerate(DataLoader)` time), `no_sync` (sync calls cost
only their overhead), `pinned_copies` (pageable copies: CPU call costs the overhead, the copy runs
`pinned_copy_speedup` x faster), `amp` (tensor-core-eligible kernels not on tensor cores run
`amp_speedup` x faster). Savings per week = saved fraction x the job's GPUs x hours per week.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

from analyzers.traces.analyses.base import AnalysisResult, Table, TraceOptions, analysis
from analyzers.traces.analyses.dataloader import is_dataloader
from analyzers.traces.analyses.pageable_memcpy import is_pageable
from analyzers.traces.analyses.steps import profiler_steps
from analyzers.traces.analyses.sync import SYNC_CALLS
from analyzers.traces.analyses.tensor_cores import eligible_kernels, uses_tensor_cores
from analyzers.traces.frame import F64, GPU_OP_CATS, RUNTIME_CATS, RankFrame, TraceSet
from analyzers.traces.stats import union_intervals

ASSUMPTIONS = (
    "CPU events keep their durations on one global clock; removed CPU time shifts everything "
    "after it; a kernel starts at max(its launch + original launch latency, previous op on its "
    "stream); a sync waits for all GPU work launched before it; the job runs all week on the "
    "stated GPUs."
)


@dataclass(frozen=True)
class Change:
    remove_cpu: tuple[F64, F64] | None = None  # intervals of CPU time that disappear
    sync_costs_overhead: bool = False
    pinned: bool = False
    amp: bool = False


def _job_gpus(trace: TraceSet, options: TraceOptions) -> int:
    if options.gpus > 0:
        return options.gpus
    for frame in trace.frames():
        info = frame.metadata.get("distributedInfo")
        if isinstance(info, dict) and isinstance(info.get("world_size"), int):
            return max(1, int(info["world_size"]))
    return max(1, len(trace.ranks))


class _Replay:
    """The dependency structure of one rank, ready to replay under a `Change`."""

    def __init__(self, frame: RankFrame, options: TraceOptions) -> None:
        self.frame = frame
        self.options = options
        steps = profiler_steps(frame)
        cpu = frame.stream == -1
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
        self.pageable = frame.names_matching(is_pageable)
        self.dataloader = frame.names_matching(is_dataloader) & cpu
        compute_tc = frame.names_matching(uses_tensor_cores)
        self.amp_eligible = eligible_kernels(frame) & ~compute_tc
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
        self.gpu_pageable = self.pageable[self.gpu].tolist()
        self.gpu_amp = self.amp_eligible[self.gpu].tolist()
        self.latency_list = latency.tolist()

    def step_time(self, change: Change) -> float:
        """Mean replayed step time (us) under `change`."""
        o = self.options
        if self.n_steps == 0:
            return math.nan
        r_start: list[float] = []
        r_end: list[float] = []
        if change.remove_cpu is not None:
            r_start, r_end = change.remove_cpu[0].tolist(), change.remove_cpu[1].tolist()
        r_cum = [0.0]
        for a, b in zip(r_start, r_end, strict=True):
            r_cum.append(r_cum[-1] + b - a)

        def removed_before(t: float) -> float:
            k = bisect.bisect_right(r_start, t)
            return 0.0 if k == 0 else r_cum[k - 1] + min(t, r_end[k - 1]) - r_start[k - 1]

        shift = 0.0
        stream_free: dict[int, float] = {}
        gpu_done = -math.inf
        last_gpu_end = -math.inf
        window_end = self.end
        gpu_dur, gpu_stream, latency = self.gpu_dur, self.gpu_stream, self.latency_list
        for t, kind, i in self.points:
            new_t = (t - removed_before(t) if r_start else t) + shift
            if kind == 0:
                dur = gpu_dur[i]
                if change.pinned and self.gpu_pageable[i]:
                    dur /= o.pinned_copy_speedup
                    shift -= max(0.0, self.launch_dur[i] - o.sync_overhead_us)
                if change.amp and self.gpu_amp[i]:
                    dur /= o.amp_speedup
                stream = gpu_stream[i]
                start = new_t + latency[i]
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
                shift += new_d - d
        cpu_end = self.end - removed_before(self.end) + shift
        cpu_start = self.start - removed_before(self.start)
        return (max(cpu_end, last_gpu_end) - cpu_start) / self.n_steps


@analysis(
    "whatif",
    "What-if estimates (Daydream-style replay)",
    None,
    "HTA has none",
)
def whatif(trace: TraceSet, options: TraceOptions) -> AnalysisResult:
    rows = []
    per_rank: dict[int, dict[str, float]] = {}
    gpus = _job_gpus(trace, options)
    for frame in trace.frames():
        replay = _Replay(frame, options)
        if replay.n_steps == 0 or not len(replay.launch):
            continue
        dl = union_intervals(frame.ts[replay.dataloader], frame.end[replay.dataloader])
        scenarios = {
            "no_dataloader_wait": Change(remove_cpu=dl),
            "no_sync": Change(sync_costs_overhead=True),
            "pinned_copies": Change(pinned=True),
            f"amp_x{options.amp_speedup:g}": Change(amp=True),
        }
        base = replay.step_time(Change())
        values: dict[str, float] = {"baseline_step_us": base}
        for name, change in scenarios.items():
            est = replay.step_time(change)
            saved = max(0.0, 1.0 - est / base) if base > 0 else 0.0
            hours = saved * gpus * options.hours_per_week
            rows.append((frame.rank, name, base, est, saved, hours))
            values[f"{name}_saved_fraction"] = saved
            values[f"{name}_gpu_hours_per_week"] = hours
        per_rank[frame.rank] = values
    return AnalysisResult(
        "whatif",
        (
            Table(
                "whatif",
                (
                    "rank",
                    "scenario",
                    "baseline_step_us",
                    "estimated_step_us",
                    "saved_fraction",
                    "gpu_hours_saved_per_week",
                ),
                tuple(rows),
            ),
        ),
        per_rank,
        (
            f"model: {ASSUMPTIONS} GPUs: {gpus}; amp speed-up {options.amp_speedup:g}x; "
            f"pinned copies {options.pinned_copy_speedup:g}x faster",
        ),
    )
