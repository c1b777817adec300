"""What-if estimates after Daydream (Zhu et al., USENIX ATC'20): replay the trace's dependency
structure (replay.py) with one thing changed and read off the new step time.

A scenario turns a replay into the `Change` it models at three levels of its assumptions (stated
in words in the table): `EXPECTED` (the estimate), `OPTIMISTIC` and `PESSIMISTIC` (the interval);
each figure is a tuple indexed by the level. Savings are against the same replay with nothing
changed, so the model's own error cancels; savings per week = saved fraction x the job's GPUs x
hours per week. `python -m bench.whatif` measures the model's error against real pairs of traces
(bench/RESULTS.md). The estimated step's interval also moves out by `SAMPLING_SPREAD` standard
errors of the baseline's mean step; the savings' does not (both replays read the same steps).

The critical path bounds each saving: any path is a lower bound on the step, so after a change
the path P still takes `length(P) - reduction(P)`, the time the change takes out of P's edges (a
stretch, like the workers' contention, is negative): a GPU op's `dur * (1 - gpu_factor)`; a launch
or kernel-kernel gap under a latency cap (CUDA graphs), what exceeds the cap; nothing on CPU,
dependency and sync edges. No bound for: syncs costing only their overhead (that removes the
path's own GPU -> CPU edges), pinned copies (the copy's CPU call shrinks with the copy), and a
change that alters a path edge's span on the CPU clock (DataLoader workers).

The figures' sources (the expected ones of AMP and the workers: `TraceOptions`):
- AMP on the GPU: Micikevicius et al., "Mixed Precision Training", ICLR'18, and NVIDIA's Deep
  Learning Performance guide (V100: 125 vs 15.7 peak TFLOPS, measured layers 2-4x); memory-bound
  kernels move half the bytes; copies and the optimizer (fp32 master weights) stay as they are.
- AMP on the CPU: bf16 autocast runs only matmul/convolution in bf16; AVX512_BF16 doubles the
  dot-product rate, but each op casts its inputs.
- Data-loader workers (PyTorch's DataLoader docs): the main thread slows while they work (shared
  cores, caches, memory bandwidth); kappa 0.35 from the public ResNet-50 0/4-worker pair.
- Fused optimizer (torch.optim `fused=True` / `foreach=True`, Apex FusedAdam): one launch per
  tensor list, not per tensor, and fewer passes over the parameters.
- CUDA graphs: the CUDA programming guide ("CUDA Graphs") and PyTorch's `torch.cuda.graphs`.
"""

from __future__ import annotations

import contextlib
import functools
import math
import re
import statistics
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from analyzers.traces.analyses.base import AnalysisResult, Table, TraceOptions, analysis
from analyzers.traces.analyses.critical_path import (
    KERNEL_KERNEL,
    LAUNCH,
    OPERATOR,
    CriticalPath,
    CriticalPathError,
    critical_path_of,
)
from analyzers.traces.analyses.dataloader import is_dataloader
from analyzers.traces.analyses.replay import Change, Replay, outermost
from analyzers.traces.analyses.tensor_cores import tensor_core_names
from analyzers.traces.classify import KernelClass
from analyzers.traces.frame import F64, RUNTIME_CATS, TraceSet
from analyzers.traces.hardware import gpu_of

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
EXPECTED, OPTIMISTIC, PESSIMISTIC = 0, 1, 2
LEVELS = (EXPECTED, OPTIMISTIC, PESSIMISTIC)
_FIXED_POINT_ROUNDS = 8  # the workers' fixed point (_workers_fixed_point)

ChangeFn = Callable[[Replay, TraceOptions, int], Change | None]


class Scenario(NamedTuple):
    assumptions: str
    fn: ChangeFn


SCENARIOS: dict[str, Scenario] = {}


def scenario(name: str, assumptions: str) -> Callable[[ChangeFn], ChangeFn]:
    def wrap(fn: ChangeFn) -> ChangeFn:
        if name in SCENARIOS:
            raise ValueError(f"what-if scenario {name!r} registered twice")
        SCENARIOS[name] = Scenario(assumptions, fn)
        return fn

    return wrap


def _merge(*warps: tuple[F64, F64, F64] | None) -> tuple[F64, F64, F64]:
    """Several warps (one at least) as one: sorted, an interval inside an earlier one dropped."""
    s, e, f = (np.concatenate([w[k] for w in warps if w is not None]) for k in range(3))
    keep: list[int] = []
    last_end = -np.inf
    for i in np.argsort(s, kind="stable").tolist():
        if s[i] >= last_end:
            keep.append(i)
            last_end = e[i]
    return s[keep], e[keep], f[keep]


def _outermost(
    replay: Replay, match: Callable[[str], object], cats: frozenset[str] | None = None
) -> tuple[F64, F64]:
    """The outermost intervals of the CPU rows (of `cats`) whose name matches, once per replay
    (every level and combination warps the same arrays)."""

    def find() -> tuple[F64, F64]:
        f = replay.frame
        rows = f.names_matching(match) & (f.stream == -1 if cats is None else f.cat_in(cats))
        return outermost(f.ts[rows], f.end[rows])

    return replay.derived(("outermost", match), find)


@scenario("no_dataloader_wait", "every enumerate(DataLoader) wait disappears (a bound, not a fix)")
def _no_dataloader_wait(replay: Replay, o: TraceOptions, level: int) -> Change | None:
    s, e = _outermost(replay, is_dataloader)
    if not len(s):
        return None
    return replay.derived("no dataloader wait", lambda: Change(cpu_warp=(s, e, np.zeros(len(s)))))


@scenario(
    "dataloader_workers",
    "DataLoader with N worker processes (TraceOptions.dataloader_workers): the loading moves to "
    "the workers, the main thread dequeues each batch (0.1-2 ms) and its CPU time stretches by "
    "kappa per core of worker load (0.1-0.6), or by processor sharing when the cores are known",
)
def _workers_change(replay: Replay, o: TraceOptions, level: int) -> Change | None:
    """Once per level and options (`dataloader_workers+amp` reuses it)."""
    return replay.derived(("workers", level, o), lambda: _workers_fixed_point(replay, o, level))


def _workers_fixed_point(replay: Replay, o: TraceOptions, level: int) -> Change | None:
    s, e = _outermost(replay, is_dataloader)
    if not len(s) or o.dataloader_workers < 1:
        return None
    load_us = float((e - s).sum()) / replay.n_steps  # loading CPU work per step, now in workers
    kappa = (o.worker_contention, 0.1, 0.6)[level]
    residual_us = (500.0, 100.0, 2000.0)[level]  # the main thread's dequeue per batch

    def change_at(step: float) -> Change:
        # N worker processes keep at most N cores busy, however long the loading takes (a
        # loader that sleeps on I/O would otherwise count as many cores and stretch the step).
        load_cores = min(load_us / max(step, 1.0), float(o.dataloader_workers))
        scale = 1.0 + kappa * load_cores
        if o.host_cores > 0:  # processor sharing once main + workers exceed the cores
            scale = max(scale, (o.main_threads + load_cores) / o.host_cores)
        # Workers keep up while N of them load a batch faster than the main thread consumes it.
        behind_us = max(0.0, load_us * scale / o.dataloader_workers - step)
        keep = np.minimum(1.0, (residual_us + behind_us) / np.maximum(e - s, 1e-9))
        return Change(cpu_warp=(s, e, keep), cpu_scale=scale)

    # The new step time is the fixed point of step = replay(change_at(step)). The replay falls
    # as the guess grows (less worker load per step), so plain iteration oscillates; averaging
    # each guess with its image converges.
    step = replay.step_time(Change(cpu_warp=(s, e, np.zeros(len(s)))))
    for _ in range(_FIXED_POINT_ROUNDS):
        step = 0.5 * (step + replay.step_time(change_at(step)))
    return change_at(step)


@scenario("no_sync", "synchronizing calls cost only their overhead (the GPU never blocks the CPU)")
def _no_sync(replay: Replay, o: TraceOptions, level: int) -> Change | None:
    return Change(sync_costs_overhead=True) if len(replay.sync) else None


@scenario(
    "pinned_copies",
    "pageable copies become pinned: the CPU call costs the overhead, the "
    "copy runs TraceOptions.pinned_copy_speedup x faster",
)
def _pinned(replay: Replay, o: TraceOptions, level: int) -> Change | None:
    return Change(pinned=True) if replay.gpu_pageable.any() else None


GEMM_KERNELS = re.compile(r"gemm|conv|cudnn.*(dgrad|wgrad|fprop)|winograd|scudnn|dgrad|wgrad", re.I)
MEMBOUND_KERNELS = re.compile(
    r"elementwise|bn_|batch_?norm|layer_?norm|pool|reduce|softmax|relu|add|mul|clamp|threshold",
    re.I,
)
CPU_AMP_OPS = re.compile(
    r"^(aten::(conv\dd|convolution|linear|addmm|mm|bmm|matmul|baddbmm))$"
    r"|^autograd::engine::evaluate_function: (Convolution|Addmm|Mm|Bmm)Backward\d*$"
)
_NOT_CHANGED, _GEMM_OP, _MEMBOUND_OP = 0, 1, 2


@functools.lru_cache(maxsize=1 << 12)
def _kernel_kind(name: str) -> int:
    """`_GEMM_OP`, `_MEMBOUND_OP` or `_NOT_CHANGED`, cached across ranks (the same long names)."""
    if GEMM_KERNELS.search(name):
        return _GEMM_OP
    return _MEMBOUND_OP if MEMBOUND_KERNELS.search(name) else _NOT_CHANGED


def _amp_kind(replay: Replay) -> np.ndarray:
    """What AMP does to each replayed op, the regexes run once per distinct kernel name."""
    frame = replay.frame
    codes = frame.name[replay.gpu]
    kind_of = np.zeros(len(frame.texts), dtype=np.int8)  # per name code; -1 (no name) last
    on_tensor_cores = tensor_core_names(frame, codes)  # per op
    for code in set(codes[~on_tensor_cores].tolist()):
        kind_of[code] = _kernel_kind(frame.texts[code])
    computation = frame.kernel_class[replay.gpu] == KernelClass.COMPUTATION
    return np.where(computation, kind_of[codes], _NOT_CHANGED)


@scenario(
    "amp",
    "mixed precision: GEMM/conv kernels off tensor cores 2-4x, memory-bound kernels "
    "1.3-2x, the rest unchanged, autocast's casts cost the CPU 0-15 %; on a CPU-only trace, "
    "matmul/conv ops 0.8-2x (bf16 autocast)",
)
def _amp(replay: Replay, o: TraceOptions, level: int) -> Change | None:
    cpu_overhead = (1.05, 1.0, 1.15)[level]
    if replay.has_gpu:
        if not gpu_of(replay.frame.device_properties).tensor_cores:
            return None  # before Volta no tensor core runs float16: nothing to move (hardware.py)
        tc = 1.0 / (o.amp_tensor_core_speedup, 4.0, 2.0)[level]
        mem = 1.0 / (o.amp_memory_speedup, 2.0, 1.3)[level]
        kind = replay.derived("amp_kind", lambda: _amp_kind(replay))
        factor = np.choose(kind, (1.0, tc, mem)).astype(np.float64)
        return Change(gpu_factor=factor, cpu_scale=cpu_overhead)
    s, e = _outermost(replay, CPU_AMP_OPS.match)
    speedup = (o.amp_cpu_speedup, 2.0, 0.8)[level]
    return Change(cpu_warp=(s, e, np.full(len(s), 1.0 / speedup))) if len(s) else None


# Bound methods of one pattern, equal call after call: `names_matching` keeps its answers per
# predicate (a lambda per call would search every name again).
_IS_OPTIMIZER_STEP = re.compile(r"Optimizer\.step#").match
_IS_LAUNCH_CALL = re.compile("Launch").search


@scenario(
    "fused_optimizer",
    "the optimizer step fused (fused=True / foreach): its CPU time to "
    "10-50 %, its kernels to 50-90 % of their time",
)
def _fused_optimizer(replay: Replay, o: TraceOptions, level: int) -> Change | None:
    s, e = _outermost(replay, _IS_OPTIMIZER_STEP)
    if not len(s):
        return None
    k = np.searchsorted(s, replay.launch_ts, side="right") - 1  # the step each launch follows
    inside = (k >= 0) & (replay.launch_ts < e[np.maximum(k, 0)])
    cpu_f = (0.25, 0.1, 0.5)[level]
    gpu_f = (0.7, 0.5, 0.9)[level]
    factor = np.where(inside, gpu_f, 1.0) if replay.has_gpu else None
    return Change(cpu_warp=(s, e, np.full(len(s), cpu_f)), gpu_factor=factor)


@scenario(
    "cuda_graphs",
    "the whole step captured in a CUDA graph: each launch call costs 5-30 % "
    "of its time, a kernel starts at most 1-5 us after it could",
)
def _cuda_graphs(replay: Replay, o: TraceOptions, level: int) -> Change | None:
    if not replay.has_gpu:
        return None
    s, e = _outermost(replay, _IS_LAUNCH_CALL, RUNTIME_CATS)
    cpu_f = (0.1, 0.05, 0.3)[level]
    cap = (2.0, 1.0, 5.0)[level]
    return Change(cpu_warp=(s, e, np.full(len(s), cpu_f)), latency_cap_us=cap)


@scenario(
    "comm_bandwidth",
    "collective kernels on TraceOptions.comm_bandwidth_ratio x the bandwidth: 1/R of their time, "
    "up to a 20 % latency-bound part that does not scale",
)
def _comm_bandwidth(replay: Replay, o: TraceOptions, level: int) -> Change | None:
    comm = replay.frame.kernel_class[replay.gpu] == KernelClass.COMMUNICATION
    if not comm.any():
        return None
    fixed = (0.1, 0.0, 0.2)[level]
    return Change(gpu_factor=np.where(comm, fixed + (1.0 - fixed) / o.comm_bandwidth_ratio, 1.0))


@scenario("dataloader_workers+amp", "both changes at once, each with its own assumptions")
def _workers_and_amp(replay: Replay, o: TraceOptions, level: int) -> Change | None:
    workers = _workers_change(replay, o, level)
    amp = _amp(replay, o, level)
    if workers is None or amp is None:
        return None
    return Change(
        cpu_warp=_merge(workers.cpu_warp, amp.cpu_warp),
        cpu_scale=workers.cpu_scale * amp.cpu_scale,
        gpu_factor=amp.gpu_factor,
    )


def _job_gpus(trace: TraceSet, options: TraceOptions) -> int:
    if options.gpus > 0:
        return options.gpus
    for frame in trace.frames():
        info = frame.metadata.get("distributedInfo")
        if isinstance(info, dict) and isinstance(info.get("world_size"), int):
            return max(1, int(info["world_size"]))
    return max(1, len(trace.ranks))


def saving_bound_us(path: CriticalPath | None, replay: Replay, change: Change) -> float:
    """The most `change` can save per step, by the critical path; +inf when it has no bound."""
    if path is None or change.sync_costs_overhead or change.pinned or replay.n_steps == 0:
        return math.inf
    rows = np.maximum(path.rows, 0)
    w = path.weights
    # A change that warps a path edge's span on the CPU clock has no bound (module docstring).
    for times in replay.derived(("path times", path), lambda: _path_times(path)):
        clock, n = replay.cpu_clock(change, times), len(times) // 2
        if not np.allclose(clock[n:] - clock[:n], times[n:] - times[:n], rtol=1e-12, atol=1e-6):
            return math.inf
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


def _path_times(path: CriticalPath) -> tuple[np.ndarray, np.ndarray]:
    """The path's longest edge (tried first: a warp most often stretches it), then every edge,
    each as begins then ends."""
    i = int(np.argmax(path.end_us - path.begin_us)) if len(path.end_us) else 0
    longest = np.concatenate([path.begin_us[i : i + 1], path.end_us[i : i + 1]])
    return longest, np.concatenate([path.begin_us, path.end_us])


def _relative_standard_error(replay: Replay) -> float:
    """Standard error of the rank's mean ProfilerStep duration, as a fraction of that mean."""
    durations = [step.duration_us for step in replay.steps]
    mean = statistics.fmean(durations) if len(durations) > 1 else 0.0
    return statistics.stdev(durations) / mean / math.sqrt(len(durations)) if mean > 0 else 0.0


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
            changes = [spec.fn(replay, options, level) for level in LEVELS]
            if (expected := changes[EXPECTED]) is None:
                continue
            # Each distinct change priced once (the levels may share one object), saving no more
            # than the critical path allows (work off the path saves nothing).
            distinct = {id(c): c for c in changes if c is not None}
            priced = {
                key: max(replay.step_time(c), base - saving_bound_us(path, replay, c))
                for key, c in distinct.items()
            }
            est, low, high = priced[id(expected)], min(priced.values()), max(priced.values())
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
    return AnalysisResult("whatif", (Table("whatif", COLUMNS, tuple(rows)),), per_rank, (note,))
