"""The table of DCGM fields the agent understands: exporter metric name -> contract column + unit.

What it is for: one place that knows that `DCGM_FI_PROF_SM_ACTIVE` and its DCGM 4.x rename
`DCGM_FI_PROF_SM_UTIL_RATIO` (same field ID 1002) both land in `gpu_samples.sm_active`, that
FB_USED is already MiB, that PROF PCIe/NVLink bytes are already per second, and which values are
DCGM's "blank" sentinels rather than measurements. normalize.py reads this table; fields that are
not in it go, unchanged, to the `extra` map.

Sources: DCGM field IDs and the 4.x "DCGM Field Naming Standard" renames (dcgm_fields.h, where the
old names stay as deprecated aliases with the same IDs); units from the help strings of
dcgm-exporter's etc/default-counters.csv and etc/dcp-metrics-included.csv; blank sentinels from
dcgm_structs.h (DCGM_INT64_BLANK = 0x7ffffffffffffff0 and NOT_FOUND / NOT_SUPPORTED /
NOT_PERMISSIONED = BLANK + 1..3; DCGM_FP64_BLANK = 140737488355328.0 = 2**47, + 1..3 likewise).
Old dcgm-exporter builds print the int64 ones as integers near 9.22e18.

Must never: hold state, or import anything beyond the standard library.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

__all__ = ["FIELDS", "PROFILING_FIELDS", "FieldSpec", "is_blank"]


@dataclass(frozen=True)
class FieldSpec:
    """Where one DCGM field goes: `column` of gpu_samples, value multiplied by `scale`."""

    field_id: int
    column: str
    scale: float = 1.0


def _spec(field_id: int, column: str, *names: str, scale: float = 1.0) -> dict[str, FieldSpec]:
    spec = FieldSpec(field_id, column, scale)
    return dict.fromkeys(names, spec)


# Every exporter name (legacy first, then the DCGM 4.x name) -> its column. Units as the contract
# wants them already, so scale is 1 for all of these; kept so that a future KB or percent field
# states its conversion here and nowhere else.
FIELDS: Final[dict[str, FieldSpec]] = {
    **_spec(203, "gpu_util", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_UTIL_RATIO"),  # % (0-100)
    **_spec(204, "mem_copy_util", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL_RATIO"),
    **_spec(252, "fb_used_mib", "DCGM_FI_DEV_FB_USED"),  # MiB per the exporter's help text
    **_spec(251, "fb_free_mib", "DCGM_FI_DEV_FB_FREE"),  # MiB
    **_spec(155, "power_w", "DCGM_FI_DEV_POWER_USAGE"),  # W
    **_spec(150, "temp_c", "DCGM_FI_DEV_GPU_TEMP"),  # C
    **_spec(100, "sm_clock_mhz", "DCGM_FI_DEV_SM_CLOCK"),  # MHz
    **_spec(101, "mem_clock_mhz", "DCGM_FI_DEV_MEM_CLOCK"),  # MHz
    **_spec(230, "xid_last", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_XID_ERROR"),
    **_spec(311, "ecc_dbe_total", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"),
    **_spec(202, "pcie_replay_total", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"),
    **_spec(240, "power_violation_us", "DCGM_FI_DEV_POWER_VIOLATION"),  # us, counter
    **_spec(241, "thermal_violation_us", "DCGM_FI_DEV_THERMAL_VIOLATION"),  # us, counter
    **_spec(
        112,
        "clocks_event_reasons",
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
    ),
    # Profiling (DCP) fields: ratios 0-1 over the sample period.
    **_spec(
        1001,
        "gr_engine_active",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO",
    ),
    **_spec(1002, "sm_active", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_UTIL_RATIO"),
    **_spec(1003, "sm_occupancy", "DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_SM_OCCUPANCY_RATIO"),
    **_spec(
        1004, "tensor_active", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_TENSOR_UTIL_RATIO"
    ),
    **_spec(1005, "dram_active", "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_DRAM_UTIL_RATIO"),
    **_spec(1006, "fp64_active", "DCGM_FI_PROF_PIPE_FP64_ACTIVE", "DCGM_FI_PROF_FP64_UTIL_RATIO"),
    **_spec(1007, "fp32_active", "DCGM_FI_PROF_PIPE_FP32_ACTIVE", "DCGM_FI_PROF_FP32_UTIL_RATIO"),
    **_spec(1008, "fp16_active", "DCGM_FI_PROF_PIPE_FP16_ACTIVE", "DCGM_FI_PROF_FP16_UTIL_RATIO"),
    **_spec(1009, "pcie_tx_bytes_s", "DCGM_FI_PROF_PCIE_TX_BYTES"),  # bytes per second
    **_spec(1010, "pcie_rx_bytes_s", "DCGM_FI_PROF_PCIE_RX_BYTES"),  # bytes per second
    **_spec(1011, "nvlink_tx_bytes_s", "DCGM_FI_PROF_NVLINK_TX_BYTES"),  # bytes per second
    **_spec(1012, "nvlink_rx_bytes_s", "DCGM_FI_PROF_NVLINK_RX_BYTES"),  # bytes per second
}

# The profiling fields dcgm-exporter's default CSV leaves disabled, with the CSV lines that enable
# them (format: field, Prometheus type, help; as in dcgm-exporter's etc/dcp-metrics-included.csv).
PROFILING_FIELDS: Final[dict[str, str]] = {
    "sm_active": "DCGM_FI_PROF_SM_ACTIVE, gauge, The ratio of cycles an SM has at least 1 warp assigned (in %).",
    "sm_occupancy": "DCGM_FI_PROF_SM_OCCUPANCY, gauge, The ratio of number of warps resident on an SM (in %).",
    "tensor_active": "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, gauge, Ratio of cycles the tensor (HMMA) pipe is active (in %).",
    "dram_active": "DCGM_FI_PROF_DRAM_ACTIVE, gauge, Ratio of cycles the device memory interface is active sending or receiving data (in %).",
    "fp64_active": "DCGM_FI_PROF_PIPE_FP64_ACTIVE, gauge, Ratio of cycles the fp64 pipes are active (in %).",
    "fp32_active": "DCGM_FI_PROF_PIPE_FP32_ACTIVE, gauge, Ratio of cycles the fp32 pipes are active (in %).",
    "fp16_active": "DCGM_FI_PROF_PIPE_FP16_ACTIVE, gauge, Ratio of cycles the fp16 pipes are active (in %).",
}

_INT64_BLANK_MIN: Final = float(0x7FFFFFFFFFFFFFF0)  # 9.223372036854776e18 as a float
_FP64_BLANK: Final = 140737488355328.0  # 2**47


def is_blank(value: float) -> bool:
    """True for DCGM's blank / not-found / not-supported / not-permissioned sentinels, NaN, inf.

    Any value at or above the int64 blank (as a double, 9.223372036854776e18, which is also what
    BLANK + 1..3 round to) is a sentinel: no real GPU counter reaches 2**63.
    """
    if value != value:  # NaN
        return True
    if value >= _INT64_BLANK_MIN or math.isinf(value):
        return True
    return _FP64_BLANK <= value <= _FP64_BLANK + 3 and value == int(value)
