"""Training steps: the `ProfilerStep#N` ranges of `prof.step()` per rank, with each step's GPU
busy time (the union of GPU rows within it). HTA's `get_profiler_steps` only lists the numbers.
A step is a CPU row named `ProfilerStep#<n>` (not its `gpu_user_annotation` copy); a step
written twice (user_annotation and cpu_op): the longest row.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

from analyzers.traces.analyses.base import RankRows, TraceOptions, analysis, gpu_busy, rank_by_rank
from analyzers.traces.frame import RankFrame
from analyzers.traces.stats import window_intersections

PLUGIN_ORDER = 90  # its place in the trace report (fleetscope.plugins)
_STEP = re.compile(r"^ProfilerStep#(\d+)$")


class Step(NamedTuple):
    number: int
    start_us: float
    end_us: float

    @property
    def duration_us(self) -> float:
        return self.end_us - self.start_us


def profiler_steps(frame: RankFrame) -> list[Step]:
    cpu = (frame.stream == -1) & (frame.cat != frame.sym("gpu_user_annotation"))
    best: dict[int, Step] = {}
    for row in np.flatnonzero(frame.names_matching(_STEP.match) & cpu).tolist():
        number = int(frame.names[frame.name[row]].removeprefix("ProfilerStep#"))
        step = Step(number, float(frame.ts[row]), float(frame.end[row]))
        if step.number not in best or step.duration_us > best[step.number].duration_us:
            best[step.number] = step
    return sorted(best.values(), key=lambda s: s.start_us)


def steps_or_span(frame: RankFrame) -> list[Step]:
    """The rank's steps, else the CPU rows' span as one step numbered -1 (no CPU row: none)."""
    cpu = frame.stream == -1
    if (found := profiler_steps(frame)) or not cpu.any():
        return found
    return [Step(-1, float(frame.ts[cpu].min()), float(frame.end[cpu].max()))]


@analysis("steps", "Profiler steps", None, "HTA lists step numbers only")
@rank_by_rank("steps", ("rank", "step", "start_us", "duration_us", "gpu_busy_us", "gpu_busy_share"))
def steps(frame: RankFrame, options: TraceOptions) -> RankRows:
    found = profiler_steps(frame)
    windows = [(step.start_us, step.end_us) for step in found]
    rows = []
    for step, busy in zip(found, window_intersections(windows, *gpu_busy(frame)), strict=True):
        share = busy / step.duration_us if step.duration_us > 0 else float("nan")
        rows.append((frame.rank, step.number, step.start_us, step.duration_us, busy, share))
    mean = sum(step.duration_us for step in found) / len(found) if found else float("nan")
    return RankRows(rows, {"steps": float(len(found)), "mean_step_us": mean})
