"""What a simulated GPU does during one phase of a job: the `Level`s scenarios are made of
(utilization, memory, power, host CPU, data wait...), each value taken from a cited measurement.
Split out of scenarios.py, which says how a job moves between these levels over time.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final


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
    iowait_pct: float  # CPU time waiting on I/O, percent of the job's cores (host-wide only)
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
        "iowait_pct": 0.4,
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
IO_WAIT = _level(
    "io_wait",  # DataLoader workers blocked on reads from network storage: CPU idle, I/O wait
    util_pct=3.0,
    sm_active=0.02,
    sm_occupancy=0.01,
    tensor_active=0.01,
    dram_active=0.01,
    pcie_rx_gbs=0.2,
    fb_frac=0.70,
    cpu_pct=12.0,
    iowait_pct=72.0,
    training=True,
)
SERVING = _level(
    "serving",  # a small model's inference server: short bursts, a few GiB of a big GPU
    util_pct=12.0,
    sm_active=0.08,
    sm_occupancy=0.05,
    tensor_active=0.05,
    dram_active=0.06,
    fp16_active=0.02,
    pcie_tx_gbs=0.3,
    pcie_rx_gbs=0.4,
    fb_frac=0.05,
    cpu_pct=15.0,
)
LEAKING = replace(BUSY, name="leaking", fb_frac=0.35)  # starts low; MemoryCreep adds the leak
NCCL_WAIT = replace(
    BUSY,
    name="nccl_wait",  # a slow all-reduce: NCCL kernels spin (GPU_UTIL high), SMs do little
    util_pct=97.0,
    sm_active=0.06,
    sm_occupancy=0.03,
    tensor_active=0.0,
    dram_active=0.03,
    fp16_active=0.0,
    fp32_active=0.0,
    nvlink_gbs=4.0,
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
    IO_WAIT,
    SERVING,
    LEAKING,
    NCCL_WAIT,
)
