"""What-if estimates in the spirit of Daydream (Zhu et al., "Daydream: Accurately Estimating the
Efficacy of Optimizations for DNN Training", USENIX ATC'20): replay the trace's dependency
structure with one thing changed and read off the new step time.

The replay model is in `replay.py`, the scenarios with their assumptions and sources in
`scenarios.py`. Each scenario is replayed three times: with its expected assumptions (the
estimate) and with its optimistic and pessimistic ones (the interval). Savings are against the
same replay with nothing changed, so the model's own error cancels; savings per week = saved
fraction x the job's GPUs x hours per week. The model's error against real pairs of traces is
measured by `python -m bench.whatif` (bench/RESULTS.md, "What-if validation").

The estimated step's interval also holds the sampling error of a mean over the trace's few
ProfilerSteps: each end moves out by two standard errors of the baseline's mean step
(`SAMPLING_SPREAD`). The savings' interval stays the assumptions' alone: both replays it
compares read the same steps, so their sampling error cancels.

The critical path bounds each saving: shortening work off it saves nothing, and work on it saves
at most its own time. Any path through the dependency graph is a lower bound on the step, so
after a change the critical path P alone still takes `length(P) - reduction(P)`, where
`reduction(P)` is the time the change takes out of P's own edges (a change that stretches P's
work, like the workers' contention, makes it negative). The reduction per path edge under a
replay `Change`: a GPU op's `dur * (1 - gpu_factor)`; a launch or kernel-kernel gap under a
latency cap (CUDA graphs), what exceeds the cap; nothing on CPU, dependency and sync edges. No
bound, the replay's estimate alone, for: syncs costing only their overhead (removing the sync
removes the path's own GPU -> CPU edges), pinned copies (the copy's CPU call shrinks with the
copy), and any change that alters a path edge's span on the CPU clock (DataLoader workers).
"""

from __future__ import annotations

import contextlib
import math
import statistics

import numpy as np

from analyzers.traces.analyses.base import AnalysisResult, TraceOptions, analysis
from analyzers.traces.analyses.critical_path import (
    KERNEL_KERNEL,
    LAUNCH,
    OPERATOR,
    CriticalPath,
    CriticalPathError,
    critical_path_of,
)
from analyzers.traces.analyses.replay import Change, Replay
from analyzers.traces.analyses.scenarios import EXPECTED, OPTIMISTIC, PESSIMISTIC, SCENARIOS
from analyzers.traces.frame import TraceSet

PLUGIN_ORDER = 170  # its place in the trace report (fleetscope.plugins)
SAMPLING_SPREAD = 2.0  # standard errors of the mean step each end of the interval moves out
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


def _step_us(replay: Replay, path: CriticalPath | None, change: Change) -> float:
    """The replayed step, saving no more than the critical path allows (work off the path saves
    nothing)."""
    est = replay.step_time(change)
    if path is None:
        return est
    return max(est, replay.step_time(Change()) - saving_bound_us(path, replay, change))


def saving_bound_us(path: CriticalPath, replay: Replay, change: Change) -> float:
    """The most `change` can save per step, by the critical path; +inf when it has no bound."""
    if change.sync_costs_overhead or change.pinned or replay.n_steps == 0:
        return math.inf
    rows = np.maximum(path.rows, 0)
    w = path.weights
    spans = replay.derived(("path times", path), lambda: _path_times(path))
    if not all(_spans_kept(replay, change, times) for times in spans):
        return math.inf  # a CPU warp: no per-edge bound (module docstring)
    reduction = np.zeros(len(path.kinds))
    if change.gpu_factor is not None:
        factor = np.ones(len(replay.frame))  # per row (a row replayed twice: its last factor)
        factor[replay.gpu] = change.gpu_factor
        gpu = (path.kinds == OPERATOR) & (path.rows >= 0) & (replay.frame.stream[rows] != -1)
        reduction += np.where(gpu, w * (1.0 - factor[rows]), 0.0)
    if change.latency_cap_us != math.inf:
        over = np.maximum(0.0, w - change.latency_cap_us)
        gaps = (path.kinds == LAUNCH) | (path.kinds == KERNEL_KERNEL)
        reduction = np.where(gaps, np.maximum(reduction, over), reduction)
    return float(reduction.sum()) / replay.n_steps


def _spans_kept(replay: Replay, change: Change, times: np.ndarray) -> bool:
    """Whether every edge (`times`: their begins, then their ends) spans as long on the change's
    CPU clock as on the trace's, to float rounding."""
    clock = replay.cpu_clock(change, times)
    n = len(times) // 2
    return bool(np.allclose(clock[n:] - clock[:n], times[n:] - times[:n], rtol=1e-12, atol=1e-6))


def _path_times(path: CriticalPath) -> tuple[np.ndarray, np.ndarray]:
    """The path's longest edge, and every edge, as `_spans_kept` reads them (begins, then ends).
    The longest edge is tried first: a change that warps the CPU clock most often stretches it,
    so one edge settles most changes."""
    i = int(np.argmax(path.end_us - path.begin_us)) if len(path.end_us) else 0
    longest = np.concatenate([path.begin_us[i : i + 1], path.end_us[i : i + 1]])
    return longest, np.concatenate([path.begin_us, path.end_us])


def _relative_standard_error(replay: Replay) -> float:
    """Standard error of the rank's mean ProfilerStep duration, as a fraction of that mean."""
    durations = [step.duration_us for step in replay.steps]
    mean = statistics.fmean(durations) if len(durations) > 1 else 0.0
    if mean <= 0:
        return 0.0
    return statistics.stdev(durations) / mean / math.sqrt(len(durations))


def _saved(base: float, est: float) -> float:
    return max(0.0, 1.0 - est / base) if base > 0 else 0.0


@analysis("whatif", "What-if estimates (Daydream-style replay)", None, "HTA has none")
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
        path = None  # without a critical path (HTA would raise), the replay's estimate alone
        with contextlib.suppress(CriticalPathError):
            path = critical_path_of(frame, native=True)
        spread = SAMPLING_SPREAD * _relative_standard_error(replay)
        for name, spec in SCENARIOS.items():
            expected = spec.fn(replay, options, EXPECTED)
            if expected is None:
                continue
            est = _step_us(replay, path, expected)
            others = (spec.fn(replay, options, level) for level in (OPTIMISTIC, PESSIMISTIC))
            # one change for all levels is priced once
            bounds = [
                est if c is None or c is expected else _step_us(replay, path, c) for c in others
            ]
            low, high = min(*bounds, est), max(*bounds, est)
            saved, saved_low, saved_high = (_saved(base, x) for x in (est, high, low))
            gpu_saved = _saved(base_gpu, replay.gpu_busy_us(expected))
            # a process that ran no GPU kernel holds no GPU-hours to give back (issue 31)
            hours = saved * gpus * options.hours_per_week if base_gpu > 0 else 0.0
            estimates = (base, est, low * (1.0 - spread), high * (1.0 + spread))
            savings = (saved, saved_low, saved_high, gpu_saved, hours)
            rows.append((frame.rank, name, *estimates, *savings, spec.assumptions))
            found = {
                "estimated_step_us": est,
                "saved_fraction": saved,
                "saved_low": saved_low,
                "saved_high": saved_high,
                "gpu_hours_per_week": hours,
                "gpu_busy_saved_fraction": gpu_saved,
            }
            values |= {f"{name}_{k}": v for k, v in found.items()}
        per_rank[frame.rank] = values
    note = (
        f"model: {ASSUMPTIONS} GPUs: {gpus}; each estimate with the interval of its scenario's "
        f"assumptions (low/high), widened by {SAMPLING_SPREAD:g} standard errors of the trace's "
        f"mean step; DataLoader workers: {options.dataloader_workers}; pinned copies "
        f"{options.pinned_copy_speedup:g}x faster"
    )
    return AnalysisResult.of_table("whatif", "whatif", COLUMNS, rows, per_rank, [note])
