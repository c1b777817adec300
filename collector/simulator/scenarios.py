"""Job scenarios: small declarative objects that say how a simulated job uses its GPUs over time.

What it is for: the ground truth of the simulated fleet starts here. A scenario names the `Level`
(what a GPU does: utilization, SM and tensor activity, memory, host CPU) a job runs at, plus the
time structure around it: a lead phase at start (checkpoint load), an alternation (data-loader
starvation in random blocks, periodic evaluation), a tail (the minute after an XID before the job
dies), one rank at a different level (a straggler), thermal throttling, XID faults, missing
profiling fields. signals.py turns these into metric values; truth.py turns them into the rules
that should fire. Adding a scenario is adding one entry to SCENARIOS; nothing else branches on
scenario names.

Levels are chosen far from every threshold in /work/shared/rules.md (copied into truth.py) so
that the truth does not hinge on noise: e.g. healthy SM_ACTIVE 0.82 against DCGM's 0.8 "good"
and 0.5 "likely ineffective", small-batch GPU utilization 38 % against SageMaker's 70 % p95.

Must never: compute values (signals.py), know about hosts (fleet.py), or use randomness.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Final

__all__ = [
    "LEVELS",
    "SCENARIOS",
    "Level",
    "Periodic",
    "RandomBlocks",
    "Scenario",
    "StepProfile",
    "Throttle",
    "Xid",
]


@dataclass(frozen=True)
class Level:
    """What one GPU does during one phase. Ratios are 0-1, percents 0-100, rates GB/s."""

    name: str
    util_pct: float  # DCGM_FI_DEV_GPU_UTIL; GR_ENGINE_ACTIVE is util_pct / 100
    sm_active: float
    sm_occupancy: float
    tensor_active: float
    dram_active: float
    fp16_active: float
    fp32_active: float
    fp64_active: float
    pcie_tx_gbs: float
    pcie_rx_gbs: float
    nvlink_gbs: float  # per direction, only when the job spans more than one GPU
    fb_frac: float  # framebuffer used / total
    cpu_pct: float  # the job's cgroup CPU use, percent of the cores it was given
    training: bool  # a training process reports step metrics in this phase


def _level(name: str, **values: float | bool) -> Level:
    base: dict[str, float | bool] = {
        "util_pct": 0.0,
        "sm_active": 0.0,
        "sm_occupancy": 0.0,
        "tensor_active": 0.0,
        "dram_active": 0.0,
        "fp16_active": 0.0,
        "fp32_active": 0.0,
        "fp64_active": 0.0,
        "pcie_tx_gbs": 0.0,
        "pcie_rx_gbs": 0.0,
        "nvlink_gbs": 0.0,
        "fb_frac": 0.0,
        "cpu_pct": 0.5,
        "training": False,
    }
    base.update(values)
    return Level(name, **base)  # type: ignore[arg-type]


FREE = _level("free")  # no job: DCGM reports an idle GPU
IDLE_NO_PROCESS = _level("idle_no_process", cpu_pct=0.3)  # allocated, nothing runs
LOADING = _level("loading", fb_frac=0.35, pcie_rx_gbs=9.0, cpu_pct=55.0)  # checkpoint load
CRASHED = _level("crashed", fb_frac=0.6, cpu_pct=3.0)  # process hung after an XID
BUSY = _level(
    "busy",
    util_pct=96.0,
    sm_active=0.82,
    sm_occupancy=0.55,
    tensor_active=0.45,
    dram_active=0.40,
    fp16_active=0.05,
    fp32_active=0.12,
    pcie_tx_gbs=2.0,
    pcie_rx_gbs=6.0,
    nvlink_gbs=60.0,
    fb_frac=0.78,
    cpu_pct=35.0,
    training=True,
)
STARVED = _level(
    "starved",  # waiting on the DataLoader: kernels stop, CPU is busy decoding
    util_pct=4.0,
    sm_active=0.02,
    sm_occupancy=0.01,
    tensor_active=0.01,
    dram_active=0.01,
    pcie_tx_gbs=0.1,
    pcie_rx_gbs=0.4,
    fb_frac=0.70,
    cpu_pct=96.0,
    training=True,
)
LOADER_BUSY = replace(
    BUSY,
    name="loader_busy",  # between stalls: smaller kernels of a lighter input pipeline
    sm_active=0.70,
    sm_occupancy=0.45,
    tensor_active=0.38,
    fb_frac=0.70,
    cpu_pct=80.0,
)
NOTEBOOK = _level(
    "notebook",  # an interactive session between cells
    util_pct=3.0,
    sm_active=0.02,
    sm_occupancy=0.01,
    dram_active=0.01,
    fb_frac=0.30,
    cpu_pct=5.0,
)
LOW_SM = _level(
    "low_sm",  # many tiny kernels: always a kernel running, few SMs busy
    util_pct=94.0,
    sm_active=0.30,
    sm_occupancy=0.15,
    tensor_active=0.08,
    dram_active=0.12,
    fp32_active=0.10,
    pcie_tx_gbs=1.0,
    pcie_rx_gbs=2.0,
    nvlink_gbs=20.0,
    fb_frac=0.50,
    cpu_pct=40.0,
    training=True,
)
FP32_ONLY = _level(
    "fp32_only",  # FP32 training on a tensor-core GPU
    util_pct=95.0,
    sm_active=0.80,
    sm_occupancy=0.50,
    dram_active=0.45,
    fp32_active=0.55,
    pcie_tx_gbs=2.0,
    pcie_rx_gbs=5.0,
    nvlink_gbs=50.0,
    fb_frac=0.85,
    cpu_pct=35.0,
    training=True,
)
MEMORY_BOUND = _level(
    "memory_bound",
    util_pct=95.0,
    sm_active=0.38,
    sm_occupancy=0.30,
    tensor_active=0.05,
    dram_active=0.90,
    fp16_active=0.03,
    fp32_active=0.08,
    pcie_tx_gbs=1.5,
    pcie_rx_gbs=3.0,
    nvlink_gbs=30.0,
    fb_frac=0.70,
    cpu_pct=30.0,
    training=True,
)
SMALL_BATCH = _level(
    "small_batch",  # launch-bound: short kernels, GPU memory mostly empty
    util_pct=38.0,
    sm_active=0.22,
    sm_occupancy=0.12,
    tensor_active=0.10,
    dram_active=0.10,
    fp32_active=0.05,
    pcie_tx_gbs=0.5,
    pcie_rx_gbs=1.5,
    nvlink_gbs=8.0,
    fb_frac=0.12,
    cpu_pct=30.0,
    training=True,
)
WAITING = replace(
    BUSY,
    name="waiting",  # ranks held at the all-reduce by a slower rank
    util_pct=64.0,
    sm_active=0.55,
    sm_occupancy=0.40,
    tensor_active=0.30,
    dram_active=0.28,
)
EVALUATING = _level(
    "evaluating",
    util_pct=30.0,
    sm_active=0.20,
    sm_occupancy=0.15,
    tensor_active=0.10,
    dram_active=0.15,
    pcie_tx_gbs=0.5,
    pcie_rx_gbs=3.0,
    fb_frac=0.78,
    cpu_pct=50.0,
)

LEVELS: Final[tuple[Level, ...]] = (
    FREE,
    IDLE_NO_PROCESS,
    LOADING,
    CRASHED,
    BUSY,
    STARVED,
    LOADER_BUSY,
    NOTEBOOK,
    LOW_SM,
    FP32_ONLY,
    MEMORY_BOUND,
    SMALL_BATCH,
    WAITING,
    EVALUATING,
)


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
class StepProfile:
    """What the training process reports per step (one process per GPU, DDP ranks)."""

    compute_s: float = 0.9  # forward + backward + optimizer of one step
    data_wait_share: float = 0.01  # share of the step spent waiting for the next batch
    workers_per_rank: int = 12  # DataLoader workers per rank; the job gets 12 cores per GPU
    batch_size: int = 32

    @property
    def step_time_s(self) -> float:
        return self.compute_s / (1.0 - self.data_wait_share)


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
    profiling: bool = True  # False: DCGM's profiling module is paused for the job (nsys/ncu)
    steps: StepProfile | None = field(default_factory=StepProfile)
    min_gpus: int = 1
    mig_ok: bool = True
    moves: bool = False  # runs on one host, then is rescheduled onto another

    @property
    def tail_s(self) -> int:
        return self.xid.tail_s if self.xid else 0


_HEALTHY_STEPS = StepProfile()

SCENARIOS: Final[dict[str, Scenario]] = {
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
