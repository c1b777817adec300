"""What the GPU of a trace can do, from the profiler's `deviceProperties` (one entry per device;
the first stands for the job), so rules and the what-if never advise what the GPU lacks. On ROCm
`computeMajor`/`Minor` hold the gfx version (MI250 = gfx90a reads 9.0, MI300 = gfx942 9.4), so
AMD GPUs are told apart by name and judged by their own generations.

Sources: NVIDIA CUDA C++ Programming Guide, "Compute Capabilities" (tensor cores from Volta,
7.0; TF32 and bf16 tensor cores from Ampere, 8.0); AMD CDNA 2/3 whitepapers (matrix cores with
fp16/bf16 from MI200, gfx90a; TF32 (xf32) from MI300, gfx942).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

_AMD_WORDS = ("amd", "radeon", "instinct", "mi100", "mi200", "mi250", "mi300")


@dataclass(frozen=True)
class Gpu:
    """One trace's GPU; `compute_capability` NaN when the trace does not say (then every
    capability is assumed: only a stated GPU is held to its limits)."""

    name: str
    vendor: str  # "nvidia", "amd" or "" (unknown)
    compute_capability: float
    memory_bytes: int | None
    sm_count: int | None

    def _at_least(self, nvidia: float, amd: float) -> bool:
        floor = amd if self.vendor == "amd" else nvidia
        return math.isnan(self.compute_capability) or self.compute_capability >= floor

    @property
    def tensor_cores(self) -> bool:
        """Tensor (NVIDIA, Volta 7.0 on) or matrix (AMD, CDNA: gfx908 reads 9.0) cores."""
        return self._at_least(7.0, 9.0)

    @property
    def tf32(self) -> bool:
        return self._at_least(8.0, 9.4)

    @property
    def bf16(self) -> bool:
        return self._at_least(8.0, 9.0)

    def describe(self) -> str:
        """`Tesla V100-SXM2-32GB (compute capability 7.0)`, for advice that names the limit."""
        if math.isnan(self.compute_capability):
            return self.name or "this GPU"
        kind = "gfx version" if self.vendor == "amd" else "compute capability"
        return f"{self.name or 'this GPU'} ({kind} {self.compute_capability:.1f})"


def gpu_of(device_properties: list[dict[str, Any]]) -> Gpu:
    """The trace's GPU from its `deviceProperties` (an unknown one when there are none)."""
    props = next((p for p in device_properties if isinstance(p, dict)), {})
    raw_name = props.get("name")
    name = raw_name if isinstance(raw_name, str) else ""
    major, minor = props.get("computeMajor"), props.get("computeMinor")
    cc = math.nan
    if isinstance(major, int) and not isinstance(major, bool):
        cc = major + (minor if isinstance(minor, int) and 0 <= minor < 10 else 0) / 10
    vendor = "amd" if any(w in name.lower() for w in _AMD_WORDS) else "nvidia" if name else ""
    memory, sms = props.get("totalGlobalMem"), props.get("numSms")
    memory = memory if isinstance(memory, int) and memory > 0 else None
    return Gpu(name, vendor, cc, memory, sms if type(sms) is int and sms > 0 else None)
