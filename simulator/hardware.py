"""The simulated hardware: GPU models, MIG layouts and the exporter-visible identity of each GPU.

What it is for: the constants a page needs that do not depend on any job (model name, PCI bus
ids, clocks, memory, power envelope), in one table. Sources: NVIDIA H100 SXM5 and A100 80GB PCIe
datasheets (TDP 700 W / 300 W; max SM clock 1980 / 1410 MHz; memory clock 2619 / 1512 MHz as
nvidia-smi reports them), DGX H100 PCI topology for bus ids, `nvidia-smi mig -lgip` on A100 80GB
for the 3g.40gb / 4g.40gb profiles (39.25 GiB = 40192 MiB each). Framebuffer totals as DCGM
reports them (FB_FREE + FB_USED).

The host around the GPUs (GPU_HOST) is one model for every GPU model: 96 logical CPUs, 12 per GPU
(the cores a Slurm or Kubernetes job gets per GPU, truth.CORES_PER_GPU; a DGX H100 has 224 and
reserves some for the system), and 2 TiB of memory (a DGX H100's). Its
network and disk devices are the names node_exporter prints on such a host.

Must never: hold state or depend on time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "A100_PCIE",
    "DRIVER_VERSION",
    "GPU_HOST",
    "GPU_MODELS",
    "H100_SXM",
    "MIG_LAYOUT",
    "GpuModel",
    "HostModel",
]

DRIVER_VERSION: Final = "570.133.20"


@dataclass(frozen=True)
class GpuModel:
    model_name: str  # DCGM's modelName label
    tdp_w: float
    idle_w: float
    sm_clock_max_mhz: int
    sm_clock_idle_mhz: int
    mem_clock_mhz: int
    fb_total_mib: int
    compute_capability: float
    nvlink: bool
    pci_bus_ids: tuple[str, ...]
    # dense BF16 tensor peak, TFLOPS: what a simulated training step's FLOPs are a share of
    # (NVIDIA H100 datasheet, H100 SXM: 1,979 with sparsity, halved; A100 datasheet: 312)
    bf16_dense_tflops: float = 0.0


H100_SXM: Final = GpuModel(
    model_name="NVIDIA H100 80GB HBM3",
    tdp_w=700.0,
    idle_w=70.0,
    sm_clock_max_mhz=1980,
    sm_clock_idle_mhz=345,
    mem_clock_mhz=2619,
    fb_total_mib=81559,
    compute_capability=9.0,
    nvlink=True,
    pci_bus_ids=tuple(
        f"00000000:{bus}:00.0" for bus in ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")
    ),
    bf16_dense_tflops=989.5,
)

A100_PCIE: Final = GpuModel(
    model_name="NVIDIA A100 80GB PCIe",
    tdp_w=300.0,
    idle_w=45.0,
    sm_clock_max_mhz=1410,
    sm_clock_idle_mhz=210,
    mem_clock_mhz=1512,
    fb_total_mib=81920,
    compute_capability=8.0,
    nvlink=False,
    pci_bus_ids=tuple(
        f"00000000:{bus}:00.0" for bus in ("17", "31", "4B", "65", "98", "B1", "CA", "E3")
    ),
    bf16_dense_tflops=312.0,
)

GPU_MODELS: Final[dict[str, GpuModel]] = {"h100": H100_SXM, "a100": A100_PCIE}


@dataclass(frozen=True)
class MigSlice:
    profile: str  # GPU_I_PROFILE
    instance_id: int  # GPU_I_ID
    fb_total_mib: int
    compute_share: float  # of the whole GPU's SMs and power


# Each A100 split in two, as in tests/data/dcgm/a100_mig.prom: 3g.40gb (GI 1) + 4g.40gb (GI 2).
MIG_LAYOUT: Final[tuple[MigSlice, ...]] = (
    MigSlice("3g.40gb", 1, 40192, 3 / 7),
    MigSlice("4g.40gb", 2, 40192, 4 / 7),
)


@dataclass(frozen=True)
class HostModel:
    """The CPU side of a GPU host, as batch.py's host rows and node.py's node_exporter page
    show it."""

    logical_cpus: int
    mem_total_bytes: int
    nic: str  # node_exporter's `device` label of the data network interface
    disk: str  # node_exporter's `device` label of the local scratch disk


GPU_HOST: Final = HostModel(
    logical_cpus=96, mem_total_bytes=2 * 1024**4, nic="enp170s0f0np0", disk="nvme0n1"
)
