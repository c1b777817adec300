"""Job scenarios: small declarative objects that say how a simulated job uses its GPUs over time.

What it is for: the ground truth of the simulated fleet starts here. A scenario names the `Level`
(what a GPU does: utilization, SM and tensor activity, memory, host CPU) a job runs at, plus the
time structure around it: a lead phase at start (checkpoint load), an alternation (data-loader
starvation in random blocks, periodic evaluation), a tail (the minute after an XID before the job
dies), one rank at a different level (a straggler), thermal throttling, XID faults, missing
profiling fields, GPU memory that creeps up through the main phase, and step-time outliers in the
steps the training process reports. signals.py turns these into metric values; truth.py turns
them into the rules that should fire. Adding a scenario is adding one entry to SCENARIOS, or, for
a new rule, carrying it on the rule (simulator.rule_scenarios: SCENARIOS holds those too);
nothing else branches on scenario names (fleet.HABITS names a few, as data: who runs them).

Levels are chosen far from every threshold in /work/shared/rules.md (copied into truth.py) so
that the truth does not hinge on noise: e.g. healthy SM_ACTIVE 0.82 against DCGM's 0.8 "good"
and 0.5 "likely ineffective", small-batch GPU utilization 38 % against SageMaker's 70 % p95.

Must never: compute values (signals.py), know about hosts (fleet.py), or use randomness.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from simulator.levels import (
    BUSY,
    EVALUATING,
    FP32_ONLY,
    IDLE_NO_PROCESS,
    IO_WAIT,
    LEAKING,
    LEVELS,
    LOADER_BUSY,
    LOADING,
    LOW_SM,
    MEMORY_BOUND,
    NCCL_WAIT,
    NOTEBOOK,
    SERVING,
    SMALL_BATCH,
    STARVED,
    WAITING,
    Level,
)
from simulator.rule_scenarios import WithRules

__all__ = [
    "ATTACHED",
    "LEVELS",
    "SCENARIOS",
    "Level",
    "MemoryCreep",
    "Periodic",
    "RandomBlocks",
    "Scenario",
    "StepProfile",
    "Throttle",
    "Xid",
]


@dataclass(frozen=True)
class RandomBlocks:
    """The job drops to `level` in random `block_s` blocks, `share` of its main phase.

    Stratified (signals.py): every 20 consecutive blocks hold exactly round(share x 20) of them,
    so even a short job's share is the designed one.
    """

    level: Level
    share: float
    block_s: int = 3


@dataclass(frozen=True)
class Periodic:
    """Every `period_s`, the last `alt_s` seconds run at `level` (evaluation passes)."""

    level: Level
    period_s: int
    alt_s: int

    @property
    def share(self) -> float:
        return self.alt_s / self.period_s


@dataclass(frozen=True)
class Throttle:
    """Thermal throttling: the first `throttled_s` of every `period_s` of the main phase."""

    period_s: int = 600
    throttled_s: int = 240
    sm_clock_mhz: int = 1305
    temp_c: int = 90


@dataclass(frozen=True)
class Xid:
    """A hardware fault on rank 0: a PCIe replay every `replay_every_s` for `replay_lead_s`, then
    XID `code` and one double-bit ECC error.

    The job dies `tail_s` after the fault (the scheduler sees the crash), so the fault time is
    the job's end minus `tail_s`. Codes: NVIDIA's XID catalog (48 = double-bit ECC error).
    """

    code: int = 48
    replay_lead_s: int = 1800
    replay_every_s: int = 2
    tail_s: int = 60


@dataclass(frozen=True)
class MemoryCreep:
    """GPU memory grows linearly through the main phase by `growth_frac` of the device (a leak:
    tensors kept across steps), on top of the level's framebuffer use."""

    growth_frac: float = 0.45


@dataclass(frozen=True)
class StepProfile:
    """What the training process reports per step (one process per GPU, DDP ranks).

    Outliers (`outlier_gaps` non-empty): from step `outlier_first` on, steps recur at these gaps
    (cycling) that take `outlier_factor` times as long, on every rank at once (a slow
    all-reduce). The gaps vary, so the outliers are no schedule (P2 ignores those), and they are
    at least 12 steps apart, so a window of 50 recent steps holds at most 3 of them and each
    stands out by more than 3 sigma. Step numbers count the steps finished, so the outliers
    delay every later step.
    """

    compute_s: float = 0.9  # forward + backward + optimizer of one step
    data_wait_share: float = 0.01  # share of the step spent waiting for the next batch
    workers_per_rank: int = 12  # DataLoader workers per rank; the job gets 12 cores per GPU
    batch_size: int = 32
    outlier_gaps: tuple[int, ...] = ()
    outlier_factor: float = 1.0
    outlier_first: int = 30
    # Measured MFU (issue 32): the script reports its FLOPs per step (sdk.report_flops), designed
    # as `mfu` x the GPU's dense BF16 peak x the step time, so FLOPs x steps/s / peak is `mfu`.
    # None: the script reports no FLOPs (most SDK-attached jobs, like the other scenarios').
    mfu: float | None = None

    @property
    def step_time_s(self) -> float:
        return self.compute_s / (1.0 - self.data_wait_share)

    @property
    def outlier_cycle(self) -> int:
        """Steps after which the outlier pattern repeats."""
        return sum(self.outlier_gaps)

    @property
    def outlier_offsets(self) -> tuple[int, ...]:
        """Positions of the outliers within one cycle, counted from a cycle's first step."""
        return tuple(sum(self.outlier_gaps[:i]) for i in range(len(self.outlier_gaps)))

    def is_outlier(self, step: int) -> bool:
        """Whether step number `step` (1 = the first step finished) is an outlier."""
        if not self.outlier_gaps or step < self.outlier_first:
            return False
        return (step - self.outlier_first) % self.outlier_cycle in self.outlier_offsets

    def steps_finished(self, seconds: float) -> int:
        """Steps finished after `seconds` of training (every outlier delays the later steps)."""
        base = self.step_time_s
        if not self.outlier_gaps or seconds < base * (self.outlier_first - 1):
            return max(0, math.floor(seconds / base))
        extra = (self.outlier_factor - 1.0) * base
        cycle_s = base * self.outlier_cycle + extra * len(self.outlier_gaps)
        rest = seconds - base * (self.outlier_first - 1)
        cycles, within = divmod(rest, cycle_s)
        done = self.outlier_first - 1 + int(cycles) * self.outlier_cycle
        offsets = self.outlier_offsets
        for j in range(1, self.outlier_cycle + 1):
            ends = base * j + extra * sum(1 for o in offsets if o <= j - 1)
            if ends > within + 1e-9:
                break
            done += 1
        return done


@dataclass(frozen=True)
class Scenario:
    """How a job uses its GPUs; `intended` lists the rules it is built to trigger (documentation
    and a test check: truth.py decides what truly fires from the numbers, not from this list)."""

    name: str
    description: str
    main: Level
    weight: float
    intended: tuple[str, ...] = ()
    lead_s: int = 0
    lead: Level = LOADING
    alternation: RandomBlocks | Periodic | None = None
    odd_rank: Level | None = None  # rank `odd_rank_index` runs at this level; others at `main`
    throttle: Throttle | None = None
    xid: Xid | None = None
    creep: MemoryCreep | None = None
    profiling: bool = True  # False: DCGM's profiling module is paused for the job (nsys/ncu)
    steps: StepProfile | None = field(default_factory=StepProfile)
    min_gpus: int = 1
    mig_ok: bool = True
    moves: bool = False  # runs on one host, then is rescheduled onto another
    long_running: bool = False  # a service: runs most of its plan, not a random duration

    @property
    def tail_s(self) -> int:
        return self.xid.tail_s if self.xid else 0


_HEALTHY_STEPS = StepProfile()


_BUILTIN: Final[dict[str, Scenario]] = {
    s.name: s
    for s in (
        Scenario("healthy", "Busy tensor-core training, nothing to fix.", BUSY, 30.0),
        Scenario(
            "idle_allocation",
            "GPUs allocated, no process ever starts (a notebook or a hung launcher).",
            IDLE_NO_PROCESS,
            8.0,
            intended=("R1", "R3"),
            steps=None,
        ),
        Scenario(
            "data_loader_stall",
            "Too few DataLoader workers: kernels stop 40 % of the time waiting for batches.",
            LOADER_BUSY,
            7.0,
            intended=("P1", "P3", "R11", "R6"),
            alternation=RandomBlocks(STARVED, share=0.4),
            steps=StepProfile(data_wait_share=0.4, workers_per_rank=2),
        ),
        Scenario(
            "interactive_notebook",
            "A notebook holding a GPU: idle between cells, busy in short bursts.",
            NOTEBOOK,
            4.0,
            intended=("R2",),
            alternation=RandomBlocks(BUSY, share=0.15, block_s=30),
            steps=None,
        ),
        Scenario(
            "low_sm_activity",
            "Tiny kernels: GPU_UTIL near 100 % while few SMs do work.",
            LOW_SM,
            5.0,
            intended=("R6",),
        ),
        Scenario(
            "no_tensor_cores",
            "FP32 training on a tensor-core GPU: SMs busy, tensor pipe idle.",
            FP32_ONLY,
            5.0,
            intended=("R7",),
        ),
        Scenario(
            "memory_bound",
            "DRAM saturated, SMs waiting on memory.",
            MEMORY_BOUND,
            5.0,
            intended=("R8", "R6"),
        ),
        Scenario(
            "small_batch",
            "Batch too small for the GPU: low utilization, little memory, idle CPU.",
            SMALL_BATCH,
            5.0,
            intended=("R12", "R11", "R6"),
            steps=StepProfile(compute_s=0.12, batch_size=4),
        ),
        Scenario(
            "straggler",
            "One rank is slower; the others wait for it at every all-reduce.",
            WAITING,
            4.0,
            intended=("R14",),
            odd_rank=BUSY,
            min_gpus=4,
            mig_ok=False,
            steps=StepProfile(compute_s=1.4),
        ),
        Scenario(
            "thermal_throttling",
            "Hot aisle: clocks drop and the thermal violation counter rises while busy.",
            BUSY,
            4.0,
            intended=("R16",),
            throttle=Throttle(),
            mig_ok=False,
        ),
        Scenario(
            "xid_errors",
            "PCIe replays, then XID 48 with a double-bit ECC error; the job dies a minute later.",
            BUSY,
            3.0,
            intended=("R17",),
            xid=Xid(),
            mig_ok=False,
        ),
        Scenario(
            "cpu_bottleneck",
            "Heavy CPU augmentation on every core: the loaders saturate the CPU and the GPUs "
            "wait 70 % of the time, with enough workers.",
            LOADER_BUSY,
            4.0,
            intended=("R9", "P1", "R11", "R6"),
            alternation=RandomBlocks(STARVED, share=0.7),
            steps=StepProfile(data_wait_share=0.7),
        ),
        Scenario(
            "io_bottleneck",
            "Small files read from network storage: the loaders wait on reads and the GPUs on "
            "them 70 % of the time. On whole nodes: I/O wait is a host-wide figure.",
            LOADER_BUSY,
            12.0,
            intended=("R10", "P1", "R11", "R6"),
            alternation=RandomBlocks(IO_WAIT, share=0.7),
            steps=StepProfile(data_wait_share=0.7),
            min_gpus=8,
            mig_ok=False,
        ),
        Scenario(
            "oversized_gpu",
            "A small model's inference service on whole H100s: 12 % busy, 4 GiB of 80.",
            SERVING,
            8.0,
            intended=("R5", "R2", "R6", "R11", "R12"),
            steps=None,
            min_gpus=4,
            mig_ok=False,
            long_running=True,
        ),
        Scenario(
            "memory_leak",
            "Training keeps tensors across steps: GPU memory grows from 35 % to 80 % of the GPU.",
            LEAKING,
            4.0,
            intended=("R13",),
            creep=MemoryCreep(growth_frac=0.45),
        ),
        Scenario(
            "step_outliers",
            "Long steps (14 s) on a congested fabric: every 12-28 steps an all-reduce takes 3x "
            "as long; NCCL kernels keep GPU_UTIL high, only step times and SM_ACTIVE show it.",
            BUSY,
            4.0,
            intended=("P2",),
            alternation=RandomBlocks(NCCL_WAIT, share=0.1, block_s=28),
            steps=StepProfile(
                compute_s=14.0,
                batch_size=512,
                outlier_gaps=(12, 16, 20, 24, 28),
                outlier_factor=3.0,
            ),
            min_gpus=2,
            mig_ok=False,
        ),
        Scenario(
            "checkpoint_load_start",
            "Healthy, but the first 8 minutes load a checkpoint with the GPU idle.",
            BUSY,
            5.0,
            lead_s=480,
        ),
        Scenario(
            "periodic_eval",
            "Healthy training with a 10-minute evaluation pass every hour.",
            BUSY,
            5.0,
            alternation=Periodic(EVALUATING, period_s=3600, alt_s=600),
        ),
        Scenario(
            "no_profiling",
            "Healthy, but DCGM profiling is paused (the user runs Nsight): no DCGM_FI_PROF_*.",
            BUSY,
            4.0,
            profiling=False,
            # on a MIG slice utilization is a profiling field (GR_ENGINE_ACTIVE; no GPU_UTIL):
            # paused, the slice reports none, and no truth or rule can judge it
            mig_ok=False,
        ),
        Scenario(
            "host_move",
            "Healthy; preempted half-way and rescheduled on another host under the same job id.",
            BUSY,
            3.0,
            moves=True,
            mig_ok=False,
        ),
    )
}


# the built-in scenarios, then those the installed rules carry (simulator.rule_scenarios)
def _carried(spec: Mapping[str, Any]) -> Scenario:
    """A scenario a rule carries as data (simulator.rule_scenarios): `main` by level name,
    `steps` as StepProfile's fields."""
    levels = {level.name: level for level in LEVELS}
    fields = dict(spec)
    fields["main"] = levels[str(fields["main"])]
    if isinstance(fields.get("steps"), Mapping):
        fields["steps"] = StepProfile(**fields["steps"])
    fields["intended"] = tuple(fields.get("intended", ()))
    return Scenario(**fields)


SCENARIOS: Final[Mapping[str, Scenario]] = WithRules(
    _BUILTIN,
    lambda data: ((str(s["name"]), _carried(s)) for s in data.get("scenarios", ())),
)

# The GPU of a job from outside the simulation (FleetSpec.attached_job): busy all along, its
# steps reported by the real process, never drawn by the planner.
ATTACHED: Final = Scenario(
    "attached",
    "A real process outside the simulation, shown on a simulated GPU.",
    BUSY,
    0.0,
    steps=None,
)
