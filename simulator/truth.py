"""Ground truth: which rules SHOULD fire for a simulated job, and how many GPU-hours it truly wastes.

What it is for: analyzer precision and recall are measured against this, so it is computed from
the scenario's designed numbers (levels, phase lengths, GPU count, duration), never from the
generated samples and never from an analyzer. Each rule of /work/shared/rules.md is one entry of
RULES (a rule added later carries its own: simulator.rule_scenarios, merged into RULES): a predicate over `JobStats` with the catalog's default threshold, and the formula of its
wasted GPU-hours, both quoted in the truth record so an evaluation can be read, not trusted.

Conventions (the catalog is silent on these; the analyzers implement the same):
- Statistics pool every sample of every GPU of the job over its whole allocation (lead and tail
  phases included): mean, p5, p95 of utilization; means of the profiling ratios.
- Utilization is DCGM_FI_DEV_GPU_UTIL, or 100 x GR_ENGINE_ACTIVE where DCGM has none (MIG).
- A job that did no work (mean utilization below 0.5 %) is reported by R1/R3 only: R2, R5, R6,
  R7, R8, R11 and R12 describe how a working job works.
- Rules on profiling fields (R6, R7, R8) cannot fire for a job whose GPUs report none.
- R5 judges whole GPUs only (a MIG slice is already the fix it recommends).
- R9 and R10 name one bottleneck per job: when both hold, the larger share of samples. I/O wait is
  a host-wide figure (cgroups have none), so a job sees its own only on the hosts it fills; on a
  shared host the other tenants' idle cores dilute it.
- R13 cuts each GPU's run into 10 equal windows of memory means and fires on growth above 5 % of
  the GPU's memory with at least 8 of the 9 steps not falling and no single step holding half the
  growth (a checkpoint load is a jump, not a creep), over at least 30 minutes.
- P2 counts outlier steps among the steps every rank reports, from step 20 on (the first 10
  ignored, then 10 recent steps needed for a mean); "recent" is the previous 50 reported steps,
  and the waste is each outlier's excess over that recent mean. Steps are all reported when they
  are longer than the sampling grid (batch.py); shorter ones are sampled, which no P2 scenario
  relies on.
- A truth is only kept when it is unambiguous: `ambiguous_rules` re-evaluates every rule with the
  levels 5 % lower and higher, phase boundaries 30 s earlier and later, and random shares 3 points
  off; the fleet planner changes any job whose verdict would flip.

R4 (per user, not per job) is in users.py.

Must never: read samples, or import the analyzers.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Final

from simulator.levels import CRASHED, FREE, Level
from simulator.rule_scenarios import WithRules
from simulator.scenarios import Periodic, RandomBlocks, Scenario
from simulator.timeline import window_means

__all__ = ["RULES", "JobShape", "JobStats", "Rule", "ambiguous_rules", "job_stats", "verdicts"]

CORES_PER_GPU: Final = 12  # the cores a job gets per GPU (96-core hosts, 8 GPUs)
GPUS_PER_NODE: Final = 8


@dataclass(frozen=True)
class JobShape:
    """What the truth needs to know about one job besides its scenario."""

    scenario: Scenario
    n_gpus: int
    duration_s: float
    fb_total_mib: float  # per GPU (or MIG slice)
    compute_capability: float
    max_nodes: int  # hosts used at the same time
    sm_clock_max_mhz: float
    mig: bool = False  # runs on MIG slices, not whole GPUs


@dataclass(frozen=True)
class _Component:
    weight: float  # share of the job's pooled GPU-seconds
    level: Level
    rank: int
    main: bool = False  # in the main phase (where a memory creep grows)


@dataclass(frozen=True)
class JobStats:
    gpu_hours: float
    duration_s: float
    n_gpus: int
    util_mean: float
    util_p5: float
    util_p95: float
    rank_util_means: tuple[float, ...]
    sm_mean: float | None
    tensor_mean: float | None
    dram_mean: float | None
    fb_max_mib: float
    mem_p95_pct: float
    cpu_p95: float
    starved_cpu_share: float  # share of samples with util < 10 % and CPU > 90 %
    starved_io_share: float  # share of samples with util < 10 % and host I/O wait > 50 %
    zero_run_s: float  # longest stretch with every GPU at 0 %
    throttled_share: float
    xid: bool
    data_wait_share: float | None
    workers_per_core: float | None
    training_share: float
    max_nodes: int
    compute_capability: float
    throttle_clock_ratio: float
    mig: bool
    judged_s: float  # the span each GPU reports samples over
    fb_windows: tuple[tuple[float, ...], ...]  # per distinct rank level: R13's window means
    step_outliers: int  # per rank: outlier steps the rule can judge
    step_outlier_excess_s: float  # per rank: their seconds above the recent mean


def _quantile(pairs: list[tuple[float, float]], q: float) -> float:
    """The q-quantile of a discrete mixture given as (value, weight) pairs."""
    total = sum(w for _, w in pairs)
    cumulative = 0.0
    for value, weight in sorted(pairs):
        cumulative += weight
        if cumulative >= q * total - 1e-12:
            return value
    return max(v for v, _ in pairs)


def _components(shape: JobShape, time_shift_s: float, share_shift: float) -> list[_Component]:
    sc = shape.scenario
    duration = shape.duration_s
    lead = min(max(sc.lead_s + time_shift_s, 0.0), duration) if sc.lead_s else 0.0
    tail = min(max(sc.tail_s + time_shift_s, 0.0), duration - lead) if sc.tail_s else 0.0
    main = max(duration - lead - tail, 0.0)
    alt = sc.alternation
    share = 0.0
    if isinstance(alt, RandomBlocks):
        share = min(max(alt.share + share_shift, 0.0), 1.0)
    elif isinstance(alt, Periodic) and main > 0:
        # exact: the last alt_s seconds of every period, so a short job may never reach one
        full, rest = divmod(main, alt.period_s)
        alt_s = full * alt.alt_s + max(0.0, rest - (alt.period_s - alt.alt_s))
        share = min(max(alt_s / main + share_shift / 3, 0.0), 1.0)
    n = shape.n_gpus
    parts: list[_Component] = []
    for rank in range(n):
        main_level = sc.odd_rank if (sc.odd_rank is not None and rank == 0) else sc.main
        phases = [
            (lead, sc.lead, False),
            (main * (1 - share), main_level, True),
            (tail, CRASHED, False),
        ]
        if alt is not None:
            phases.append((main * share, alt.level, True))
        parts.extend(
            _Component(seconds / duration / n, level, rank, in_main)
            for seconds, level, in_main in phases
            if seconds
        )
    return parts


_CREEP_SLICES: Final = 20


def _fb_pairs(shape: JobShape, parts: list[_Component]) -> list[tuple[float, float]]:
    """(framebuffer fraction, weight) of the job's samples; a creep spreads the main phase over
    its linear ramp (in _CREEP_SLICES equal slices)."""
    creep = shape.scenario.creep
    if creep is None:
        return [(p.level.fb_frac, p.weight) for p in parts]
    pairs = []
    for p in parts:
        if not p.main:
            pairs.append((p.level.fb_frac, p.weight))
            continue
        for i in range(_CREEP_SLICES):
            grown = creep.growth_frac * (i + 0.5) / _CREEP_SLICES
            pairs.append((p.level.fb_frac + grown, p.weight / _CREEP_SLICES))
    return pairs


def job_stats(
    shape: JobShape,
    *,
    level_scale: float = 1.0,
    time_shift_s: float = 0.0,
    share_shift: float = 0.0,
) -> JobStats:
    """The job's designed statistics; the keyword arguments perturb them for `ambiguous_rules`."""
    sc = shape.scenario
    parts = _components(shape, time_shift_s, share_shift)
    k = level_scale

    def mean(attr: str) -> float:
        return float(sum(p.weight * getattr(p.level, attr) * k for p in parts))

    util = [(min(p.level.util_pct * k, 100.0), p.weight) for p in parts]
    rank_means = tuple(
        sum(p.weight * p.level.util_pct * k for p in parts if p.rank == r) * shape.n_gpus
        for r in range(shape.n_gpus)
    )
    zero_levels = [p for p in parts if p.level.util_pct == 0]
    if len(zero_levels) == len(parts):
        zero_run = shape.duration_s + time_shift_s
    else:
        zero_run = max(
            min(sc.lead_s + time_shift_s, shape.duration_s) if sc.lead.util_pct == 0 else 0.0,
            sc.tail_s + time_shift_s if sc.tail_s else 0.0,
            0.0,
        )
    throttled = 0.0
    if sc.throttle is not None:
        # exact: the first throttled_s seconds of every period of the main phase
        main_s = shape.duration_s - sc.lead_s - sc.tail_s
        full, rest = divmod(main_s, sc.throttle.period_s)
        throttled_s = full * sc.throttle.throttled_s + min(rest, sc.throttle.throttled_s)
        throttled = throttled_s / shape.duration_s
    steps = sc.steps
    training = sum(p.weight for p in parts if p.level.training)
    # I/O wait is host-wide: a job filling its hosts sees its own, else diluted by idle tenants
    host_share = min(1.0, shape.n_gpus / (GPUS_PER_NODE * shape.max_nodes))
    idle_io = FREE.iowait_pct
    ranks = sorted({0, shape.n_gpus - 1})  # rank 0 may be the odd one; the others are alike
    outliers, excess = _step_outliers(shape, time_shift_s)
    return JobStats(
        gpu_hours=shape.n_gpus * (shape.duration_s + time_shift_s) / 3600.0,
        duration_s=shape.duration_s,
        n_gpus=shape.n_gpus,
        util_mean=mean("util_pct"),
        util_p5=_quantile(util, 0.05),
        util_p95=_quantile(util, 0.95),
        rank_util_means=rank_means,
        sm_mean=mean("sm_active") if sc.profiling else None,
        tensor_mean=mean("tensor_active") if sc.profiling else None,
        dram_mean=mean("dram_active") if sc.profiling else None,
        fb_max_mib=max(
            p.level.fb_frac + (sc.creep.growth_frac if sc.creep and p.main else 0.0) for p in parts
        )
        * shape.fb_total_mib,
        mem_p95_pct=_quantile([(f * 100, w) for f, w in _fb_pairs(shape, parts)], 0.95),
        cpu_p95=_quantile([(p.level.cpu_pct * k, p.weight) for p in parts], 0.95),
        starved_cpu_share=sum(
            p.weight for p in parts if p.level.util_pct * k < 10 and p.level.cpu_pct * k > 90
        ),
        starved_io_share=sum(
            p.weight
            for p in parts
            if p.level.util_pct * k < 10
            and (p.level.iowait_pct * host_share + idle_io * (1 - host_share)) * k > 50
        ),
        zero_run_s=zero_run,
        throttled_share=throttled,
        xid=sc.xid is not None,
        data_wait_share=steps.data_wait_share if steps else None,
        workers_per_core=steps.workers_per_rank / CORES_PER_GPU if steps else None,
        training_share=training,
        max_nodes=shape.max_nodes,
        compute_capability=shape.compute_capability,
        throttle_clock_ratio=(
            sc.throttle.sm_clock_mhz / shape.sm_clock_max_mhz if sc.throttle else 1.0
        ),
        mig=shape.mig,
        judged_s=shape.duration_s + time_shift_s,
        fb_windows=tuple(
            window_means(
                sc,
                shape.duration_s,
                rank,
                "fb_frac",
                MEMORY_WINDOWS,
                level_scale=k,
                time_shift_s=time_shift_s,
                share_shift=share_shift,
            )
            for rank in ranks
        ),
        step_outliers=outliers,
        step_outlier_excess_s=excess,
    )


MEMORY_WINDOWS: Final = 10  # SageMaker GPUMemoryIncrease: over 10 windows
RECENT_STEPS: Final = 50  # P2's "recent steps" (fleetscope's choice, analyzers/rules/p02)
SKIP_STEPS: Final = 10  # SageMaker StepOutlier: the first 10 steps are ignored


def _step_outliers(shape: JobShape, time_shift_s: float) -> tuple[int, float]:
    """Per rank: outlier steps P2 can judge and their excess seconds over the recent mean.

    Every step up to the last one finished is reported (steps longer than the grid); a step is
    judged from SKIP_STEPS + 10 on (10 recent steps needed); its recent mean is over the previous
    min(50, step - SKIP_STEPS) steps, each 1x or outlier_factor x the step time.
    """
    sc = shape.scenario
    steps = sc.steps
    if steps is None or not steps.outlier_gaps:
        return 0, 0.0
    share = 1.0
    if isinstance(sc.alternation, Periodic):
        share = 1.0 - sc.alternation.share
    training_s = (shape.duration_s - sc.lead_s - sc.tail_s + time_shift_s) * share
    last = steps.steps_finished(training_s)
    base, factor = steps.step_time_s, steps.outlier_factor
    count, excess = 0, 0.0
    for n in range(SKIP_STEPS + 10, last + 1):
        if not steps.is_outlier(n):
            continue
        recent = range(max(SKIP_STEPS, n - RECENT_STEPS), n)
        slow = sum(1 for m in recent if steps.is_outlier(m))
        mean = base * (1 + (factor - 1) * slow / len(recent))
        count += 1
        excess += factor * base - mean
    return count, excess


def _worked(s: JobStats) -> bool:
    return s.util_mean >= 0.5


def _profiled_and_worked(s: JobStats) -> bool:
    return _worked(s) and s.sm_mean is not None


def _sm(s: JobStats) -> float:
    return s.sm_mean if s.sm_mean is not None else 0.0


def _creeping(means: tuple[float, ...]) -> bool:
    """R13 on one GPU's window means (fractions of its memory)."""
    growth = means[-1] - means[0]
    steps = [b - a for a, b in pairwise(means)]
    rising = sum(1 for d in steps if d >= 0)
    return growth > 0.05 and rising >= 8 and max(steps) <= 0.5 * growth


@dataclass(frozen=True)
class Rule:
    rule_id: str
    fires: Callable[[JobStats], bool]
    waste: Callable[[JobStats], float]
    how: str  # the predicate and the waste formula, in words, with the threshold's source


_BUILTIN: Final[dict[str, Rule]] = {
    r.rule_id: r
    for r in (
        Rule(
            "R1",
            lambda s: not _worked(s) and s.duration_s > 300,
            lambda s: s.gpu_hours,
            "job-mean utilization 0 and run time > 300 s (jobstats); waste: every allocated GPU-hour",
        ),
        Rule(
            "R2",
            lambda s: _worked(s) and s.util_mean < 25,
            lambda s: s.gpu_hours * (1 - s.util_mean / 100),
            "0 < job-mean utilization < 25 % (jobstats warn; <= 15 % red); waste: GPU-h x (1 - mean util)",
        ),
        Rule(
            "R3",
            lambda s: s.zero_run_s >= 3600,
            lambda s: s.gpu_hours * s.zero_run_s / s.duration_s,
            "every sample 0 % for >= 60 min (job_defense_shield); waste: the idle GPU-hours",
        ),
        Rule(
            "R5",
            lambda s: (
                _worked(s)
                and not s.mig
                and s.util_mean < 20
                and s.fb_max_mib < 10 * 1024
                and s.gpu_hours > 24
            ),
            lambda s: s.gpu_hours * (1 - s.util_mean / 100),
            "whole GPUs, util < 20 %, GPU memory < 10 GiB, > 24 GPU-h (job_defense_shield); waste: GPU-h x (1 - mean util)",
        ),
        Rule(
            "R6",
            lambda s: _profiled_and_worked(s) and _sm(s) < 0.5,
            lambda s: s.gpu_hours * max(0.0, 0.8 - _sm(s)) / 0.8,
            "job-mean SM_ACTIVE < 0.5 (DCGM docs); waste: GPU-h x (0.8 - SM_ACTIVE) / 0.8, the gap to DCGM's 0.8 target",
        ),
        Rule(
            "R7",
            lambda s: (
                _profiled_and_worked(s)
                and s.compute_capability >= 7
                and _sm(s) >= 0.5
                and (s.tensor_mean or 0.0) < 0.02
            ),
            lambda s: s.gpu_hours * 0.5,
            "compute capability >= 7, SM_ACTIVE >= 0.5, PIPE_TENSOR_ACTIVE < 0.02 (TB plugin, DCGM); waste: GPU-h x 0.5 (AMP/bf16 at least doubles throughput on tensor cores)",
        ),
        Rule(
            "R8",
            lambda s: _profiled_and_worked(s) and (s.dram_mean or 0.0) > 0.8 and _sm(s) < 0.5,
            lambda s: s.gpu_hours * max(0.0, 0.8 - _sm(s)) / 0.8,
            "DRAM_ACTIVE > 0.8 with SM_ACTIVE < 0.5 (DCGM docs, ClusterCockpit); waste: GPU-h x (0.8 - SM_ACTIVE) / 0.8",
        ),
        Rule(
            "R9",
            lambda s: s.starved_cpu_share > 0.5 and s.starved_cpu_share >= s.starved_io_share,
            lambda s: s.gpu_hours * s.starved_cpu_share,
            "util < 10 % while CPU > 90 % in > 50 % of samples (SageMaker Debugger); waste: GPU-h x that share",
        ),
        Rule(
            "R10",
            lambda s: s.starved_io_share > 0.5 and s.starved_io_share > s.starved_cpu_share,
            lambda s: s.gpu_hours * s.starved_io_share,
            "util < 10 % while host I/O wait > 50 % in > 50 % of samples (SageMaker Debugger); waste: GPU-h x that share",
        ),
        Rule(
            "R11",
            lambda s: _worked(s) and (s.util_p95 < 70 or (s.util_p95 > 70 and s.util_p5 < 10)),
            lambda s: s.gpu_hours * (1 - s.util_mean / 100),
            "p95 util < 70 % (under-utilized) or p95 > 70 % and p5 < 10 % (fluctuating) (SageMaker Debugger); waste: GPU-h x (1 - mean util)",
        ),
        Rule(
            "R12",
            lambda s: _worked(s) and s.cpu_p95 < 70 and s.util_p95 < 70 and s.mem_p95_pct < 70,
            lambda s: s.gpu_hours * (1 - s.util_mean / 100),
            "p95 CPU < 70 %, p95 GPU util < 70 %, p95 GPU memory < 70 % (SageMaker Debugger); waste: GPU-h x (1 - mean util)",
        ),
        Rule(
            "R13",
            lambda s: s.judged_s >= 1800 and any(_creeping(m) for m in s.fb_windows),
            lambda s: 0.0,
            "10 window means of GPU memory grow > 5 % of the GPU, 8 of 9 steps not falling, no step half the growth, >= 30 min (SageMaker Debugger); waste: not estimated (a risk)",
        ),
        Rule(
            "R14",
            lambda s: s.n_gpus > 1 and max(s.rank_util_means) - min(s.rank_util_means) > 20,
            lambda s: sum(
                s.gpu_hours / s.n_gpus * (max(s.rank_util_means) - u) / max(s.rank_util_means)
                for u in s.rank_util_means
            ),
            "per-GPU mean utilization of one job differs by > 20 points (SageMaker Debugger); waste: per GPU, GPU-h x (busiest - own) / busiest",
        ),
        Rule(
            "R15",
            lambda s: s.max_nodes > math.ceil(s.n_gpus / GPUS_PER_NODE),
            lambda s: 0.0,
            "more nodes at once than ceil(GPUs / 8) (jobstats); waste: not estimated",
        ),
        Rule(
            "R16",
            lambda s: s.throttled_share > 0,
            lambda s: s.gpu_hours * s.throttled_share * (1 - s.throttle_clock_ratio),
            "thermal violation counter rising while busy (DCGM fields); waste: throttled GPU-h x (1 - throttled clock / max clock)",
        ),
        Rule(
            "R17",
            lambda s: s.xid,
            lambda s: 0.0,
            "XID error, DBE or PCIe replays rising on a GPU of the job (dcgm-exporter); waste: not estimated (a health flag)",
        ),
        Rule(
            "P1",
            lambda s: s.data_wait_share is not None and s.data_wait_share > 0.05,
            lambda s: s.gpu_hours * (s.data_wait_share or 0.0) * s.training_share,
            "data-wait / step time > 5 % (TB plugin; >= 20 % highly input-bound, TF profiler); waste: GPU-h x training share x data-wait share",
        ),
        Rule(
            "P2",
            lambda s: s.step_outliers >= 10,
            lambda s: s.n_gpus * s.step_outlier_excess_s / 3600.0,
            "steps > 3 sigma above the previous 50, first 10 ignored, >= 10 per rank (SageMaker Debugger); waste: ranks x outliers' seconds above the recent mean",
        ),
        Rule(
            "P3",
            lambda s: s.workers_per_core is not None and not 0.7 <= s.workers_per_core <= 2.0,
            lambda s: 0.0,
            "DataLoader workers < 70 % or > 200 % of the job's CPU cores (SageMaker Debugger); waste: counted under P1",
        ),
    )
}


# the built-in truths, then the per-job ones installed rules carry (simulator.rule_scenarios)
RULES: Final[Mapping[str, Rule]] = WithRules(
    _BUILTIN, lambda data: ((str(r["rule_id"]), Rule(**r)) for r in data.get("rules", ()))
)


def verdicts(stats: JobStats) -> dict[str, float]:
    """Rule id -> wasted GPU-hours, for every rule that fires."""
    return {rid: rule.waste(stats) for rid, rule in RULES.items() if rule.fires(stats)}


_PERTURBATIONS: Final = tuple(
    {"level_scale": k, "time_shift_s": dt, "share_shift": ds}
    for k in (0.95, 1.05)
    for dt in (-30.0, 30.0)
    for ds in (-0.03, 0.03)
)


@functools.lru_cache(maxsize=4096)
def ambiguous_rules(shape: JobShape) -> frozenset[str]:
    """Rules whose verdict would flip under small perturbations of the designed numbers."""
    nominal = set(verdicts(job_stats(shape)))
    flipped: set[str] = set()
    for perturbation in _PERTURBATIONS:
        flipped |= nominal ^ set(verdicts(job_stats(shape, **perturbation)))
    return frozenset(flipped)
