"""What-if estimates in the spirit of Daydream (Zhu et al., "Daydream: Accurately Estimating the
Efficacy of Optimizations for DNN Training", USENIX ATC'20): replay the trace's dependency
structure with one thing changed and read off the new step time.

The replay model is in `replay.py`, the scenarios with their assumptions and sources in
`scenarios.py`. Each scenario is replayed three times: with its expected assumptions (the
estimate) and with its optimistic and pessimistic ones (the interval). Savings are against the
same replay with nothing changed, so the model's own error cancels; savings per week = saved
fraction x the job's GPUs x hours per week. The model's error against real pairs of traces is
measured by `python -m bench.whatif` (bench/RESULTS.md, "What-if validation").

The estimated step's interval also holds the sampling error: the replayed step is a mean over the
trace's few ProfilerSteps (often 5-10), and steps of one run differ by several percent (a slow
batch, a warm-up), so the same change recorded again lands elsewhere by about that much. Each end
moves out by two standard errors of the baseline's mean step (`SAMPLING_SPREAD`), relative to
the step; a trace with one step adds nothing. The savings' interval stays the assumptions' alone:
both replays it compares read the same steps, so their sampling error cancels.
"""

from __future__ import annotations

import math
import statistics

from analyzers.traces.analyses.base import AnalysisResult, Table, TraceOptions, analysis
from analyzers.traces.analyses.critical_path import (
    CriticalPath,
    CriticalPathError,
    critical_path_of,
)
from analyzers.traces.analyses.critical_whatif import saving_bound_us
from analyzers.traces.analyses.replay import Change, Replay
from analyzers.traces.analyses.scenarios import EXPECTED, OPTIMISTIC, PESSIMISTIC, SCENARIOS
from analyzers.traces.frame import RankFrame, TraceSet

ASSUMPTIONS = (
    "CPU events keep their order on one global clock; changed CPU time shifts everything after "
    "it; a kernel starts at max(its launch + original launch latency, previous op on its "
    "stream); a sync waits for all GPU work launched before it; no change saves more than it "
    "takes out of the critical path; the job runs all week on the stated GPUs."
)
COLUMNS = (
    "rank",
    "scenario",
    "baseline_step_us",
    "estimated_step_us",
    "estimated_low_us",
    "estimated_high_us",
    "saved_fraction",
    "saved_low",
    "saved_high",
    "gpu_busy_saved_fraction",
    "gpu_hours_saved_per_week",
    "assumptions",
)


def _job_gpus(trace: TraceSet, options: TraceOptions) -> int:
    if options.gpus > 0:
        return options.gpus
    for frame in trace.frames():
        info = frame.metadata.get("distributedInfo")
        if isinstance(info, dict) and isinstance(info.get("world_size"), int):
            return max(1, int(info["world_size"]))
    return max(1, len(trace.ranks))


def _critical_path(frame: RankFrame) -> CriticalPath | None:
    try:
        return critical_path_of(frame, native=True)
    except CriticalPathError:
        return None


def _step_us(replay: Replay, path: CriticalPath | None, change: Change) -> float:
    """The replayed step, saving no more than the critical path allows (critical_whatif.py:
    work off the path saves nothing)."""
    est = replay.step_time(change)
    if path is None:
        return est
    return max(est, replay.step_time(Change()) - saving_bound_us(path, replay, change))


SAMPLING_SPREAD = 2.0  # standard errors of the mean step each end of the interval moves out


def _relative_standard_error(replay: Replay) -> float:
    """Standard error of the rank's mean ProfilerStep duration, as a fraction of that mean."""
    durations = [step.duration_us for step in replay.steps]
    mean = statistics.fmean(durations) if len(durations) > 1 else 0.0
    if mean <= 0:
        return 0.0
    return statistics.stdev(durations) / mean / math.sqrt(len(durations))


def _saved(base: float, est: float) -> float:
    return max(0.0, 1.0 - est / base) if base > 0 else 0.0


PLUGIN_ORDER = 170  # its place in the trace report (fleetscope.plugins)


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
        replay = Replay(frame, options)
        if replay.n_steps == 0:
            continue
        base = replay.step_time(Change())
        base_gpu = replay.gpu_busy_us(Change())
        values: dict[str, float] = {"baseline_step_us": base}
        path = _critical_path(frame)
        spread = SAMPLING_SPREAD * _relative_standard_error(replay)
        for name, spec in SCENARIOS.items():
            expected = spec.fn(replay, options, EXPECTED)
            if expected is None:
                continue
            est = _step_us(replay, path, expected)
            bounds = []
            for level in (OPTIMISTIC, PESSIMISTIC):
                change = spec.fn(replay, options, level)
                if change is None or change is expected:  # one change for all levels: priced once
                    bounds.append(est)
                else:
                    bounds.append(_step_us(replay, path, change))
            low, high = min(*bounds, est), max(*bounds, est)
            saved = _saved(base, est)
            gpu_saved = _saved(base_gpu, replay.gpu_busy_us(expected)) if base_gpu else 0.0
            # a process that ran no GPU kernel holds no GPU-hours to give back (issue 31: a
            # CPU-only trace was credited a week of its world size)
            hours = saved * gpus * options.hours_per_week if base_gpu > 0 else 0.0
            rows.append(
                (
                    frame.rank, name, base, est, low * (1.0 - spread), high * (1.0 + spread),
                    saved, _saved(base, high),
                    _saved(base, low), gpu_saved, hours, spec.assumptions,
                )
            )  # fmt: skip
            values[f"{name}_estimated_step_us"] = est
            values[f"{name}_saved_fraction"] = saved
            values[f"{name}_saved_low"] = _saved(base, high)
            values[f"{name}_saved_high"] = _saved(base, low)
            values[f"{name}_gpu_hours_per_week"] = hours
            values[f"{name}_gpu_busy_saved_fraction"] = gpu_saved
        per_rank[frame.rank] = values
    return AnalysisResult(
        "whatif",
        (Table("whatif", COLUMNS, tuple(rows)),),
        per_rank,
        (
            f"model: {ASSUMPTIONS} GPUs: {gpus}; each estimate with the interval of its "
            f"scenario's assumptions (low/high), widened by {SAMPLING_SPREAD:g} standard errors "
            f"of the trace's mean step; DataLoader workers: "
            f"{options.dataloader_workers}; pinned copies {options.pinned_copy_speedup:g}x "
            "faster",
        ),
    )
