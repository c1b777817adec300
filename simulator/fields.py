"""The fields the simulated dcgm-exporter emits, in the order it prints them, with HELP and TYPE.

What it is for: one table that both the page renderer and the batch generator read, so a live
page and a batch row can never disagree on which fields exist or how they are printed.

The counters CSV this stands for is dcgm-exporter's etc/default-counters.csv with the profiling
block of etc/dcp-metrics-included.csv enabled (SM_ACTIVE, SM_OCCUPANCY and the FP pipes
uncommented, the lines fleetscope.dcgm_fields.PROFILING_FIELDS tells users to add), plus the
violation, ECC and clock-event fields that the default CSV ships commented out. HELP strings are the CSVs' own (NVLink's from dcgm-exporter's
built-in counter table). Order: the order of the shared real pages (tests/data/dcgm/*.prom, which
is not the CSV's order), with the fields they lack inserted next to their CSV neighbours.

Value kinds follow DCGM's field types: `int` fields (DCGM_FT_INT64) are printed with Go's `%d`,
`float` fields (DCGM_FT_DOUBLE) with `%f`, as dcgm-exporter's collector `toString` does.

Must never: compute values, or know about jobs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["EXPORTER_FIELDS", "ExporterField"]

Kind = Literal["int", "float"]


@dataclass(frozen=True)
class ExporterField:
    """One metric family: `key` is the simulator's name for its value array."""

    name: str
    prom_type: Literal["gauge", "counter"]
    help: str
    kind: Kind
    key: str
    profiling: bool = False  # a DCP field: absent while profiling is unavailable on the GPU
    whole_gpu_only: bool = False  # DCGM has no value for a MIG instance (GPU_UTIL)


def _f(
    name: str,
    prom_type: Literal["gauge", "counter"],
    help_text: str,
    kind: Kind,
    key: str,
    **flags: bool,
) -> ExporterField:
    return ExporterField(name, prom_type, help_text, kind, key, **flags)


_RATE_HELP = (
    "over the PCIe bus - including both protocol headers and data payloads - in bytes per second."
)

EXPORTER_FIELDS: Final[tuple[ExporterField, ...]] = (
    _f("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", "int", "sm_clock_mhz"),
    _f(
        "DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", "int", "mem_clock_mhz"
    ),
    _f(
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
        "gauge",
        "Current clock event reasons.",
        "int",
        "clocks_event_reasons",
    ),
    _f("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", "int", "temp_c"),
    _f("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", "float", "power_w"),
    _f(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "counter",
        "Total energy consumption since boot (in mJ).",
        "int",
        "energy_mj",
    ),
    _f(
        "DCGM_FI_DEV_GPU_UTIL",
        "gauge",
        "GPU utilization (in %).",
        "int",
        "gpu_util",
        whole_gpu_only=True,
    ),
    _f("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", "int", "mem_copy_util"),
    _f("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", "int", "fb_free_mib"),
    _f("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", "int", "fb_used_mib"),
    _f(
        "DCGM_FI_DEV_XID_ERRORS",
        "gauge",
        "Value of the last XID error encountered.",
        "int",
        "xid_last",
    ),
    _f(
        "DCGM_FI_DEV_POWER_VIOLATION",
        "counter",
        "Throttling duration due to power constraints (in us).",
        "int",
        "power_violation_us",
    ),
    _f(
        "DCGM_FI_DEV_THERMAL_VIOLATION",
        "counter",
        "Throttling duration due to thermal constraints (in us).",
        "int",
        "thermal_violation_us",
    ),
    _f(
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "counter",
        "Total number of PCIe retries.",
        "int",
        "pcie_replay_total",
    ),
    _f(
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "counter",
        "Total number of double-bit volatile ECC errors.",
        "int",
        "ecc_dbe_total",
    ),
    _f(
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "gauge",
        "Ratio of time the graphics engine is active.",
        "float",
        "gr_engine_active",
        profiling=True,
    ),
    _f(
        "DCGM_FI_PROF_SM_ACTIVE",
        "gauge",
        "The ratio of cycles an SM has at least 1 warp assigned.",
        "float",
        "sm_active",
        profiling=True,
    ),
    _f(
        "DCGM_FI_PROF_SM_OCCUPANCY",
        "gauge",
        "The ratio of number of warps resident on an SM.",
        "float",
        "sm_occupancy",
        profiling=True,
    ),
    _f(
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "gauge",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
        "float",
        "tensor_active",
        profiling=True,
    ),
    _f(
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
        "float",
        "dram_active",
        profiling=True,
    ),
    _f(
        "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
        "gauge",
        "Ratio of cycles the fp64 pipes are active.",
        "float",
        "fp64_active",
        profiling=True,
    ),
    _f(
        "DCGM_FI_PROF_PIPE_FP32_ACTIVE",
        "gauge",
        "Ratio of cycles the fp32 pipes are active.",
        "float",
        "fp32_active",
        profiling=True,
    ),
    _f(
        "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
        "gauge",
        "Ratio of cycles the fp16 pipes are active.",
        "float",
        "fp16_active",
        profiling=True,
    ),
    _f(
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "gauge",
        "The rate of data transmitted " + _RATE_HELP,
        "float",
        "pcie_tx_bytes_s",
        profiling=True,
    ),
    _f(
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "gauge",
        "The rate of data received " + _RATE_HELP,
        "float",
        "pcie_rx_bytes_s",
        profiling=True,
    ),
    _f(
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
        "gauge",
        "The rate of data transmitted over NVLink not including protocol headers in bytes per second",
        "float",
        "nvlink_tx_bytes_s",
        profiling=True,
    ),
    _f(
        "DCGM_FI_PROF_NVLINK_RX_BYTES",
        "gauge",
        "The rate of data received over NVLink not including protocol headers in bytes per second",
        "float",
        "nvlink_rx_bytes_s",
        profiling=True,
    ),
)
