"""MFU, measured, and its DCGM proxy: two different figures that are never mixed.

- **Measured MFU** (SDK-attached jobs): model FLOPs per step (one profiled step's FLOPs,
  collector.sdk.flops) x steps per second (the SDK's step metrics) / (GPUs x the dense peak of
  the GPU model and dtype, analyzers.mfu.peaks). As PaLM defines it (Chowdhery et al. 2022,
  appendix B): achieved model FLOPs over peak, recomputation not counted as model FLOPs.
- **Proxy** (every other job): DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, the share of cycles the tensor
  pipes were busy. It is labelled "tensor-pipe active (proxy)" wherever it shows: a busy tensor
  pipe is not useful model work (recomputation, padding and low-occupancy kernels count), and a
  job on CUDA cores does useful work with it at 0.

Pure arithmetic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from analyzers.mfu.peaks import peak_flops

Kind = Literal["measured", "proxy"]


@dataclass(frozen=True)
class Mfu:
    """One job's figure, and which kind it is."""

    value: float  # 0-1
    kind: Kind
    basis: str  # how it was obtained, in words

    @property
    def percent(self) -> str:
        """`38.2 %`; below 0.1 % two significant digits (`0.000051 %`: a small model on a big
        GPU), never a misleading `0.0 %` nor an exponent a report reader must decode."""
        return percent(self.value)

    @property
    def label(self) -> str:
        return "MFU" if self.kind == "measured" else "tensor-pipe active (MFU proxy, DCGM)"


def percent(value: float) -> str:
    """An MFU (0-1) as every view prints it (Mfu.percent)."""
    pct = 100 * value
    if pct >= 0.1 or pct <= 0 or not math.isfinite(pct):
        return f"{pct:.1f} %"
    return f"{pct:.{1 - math.floor(math.log10(pct))}f} %"  # two significant digits, no exponent


def measured_mfu(
    flops_per_step: float, steps_per_s: float, gpus: int, gpu_model: str | None, dtype: str
) -> Mfu | None:
    """Measured MFU, or None where the peak of that model and dtype is not in the table."""
    peak = peak_flops(gpu_model, dtype)
    if peak is None or gpus <= 0 or flops_per_step <= 0 or steps_per_s <= 0:
        return None
    value = flops_per_step * steps_per_s / (gpus * peak)
    basis = (
        f"{flops_per_step:.3g} FLOPs/step x {steps_per_s:.3g} steps/s over {gpus} x "
        f"{peak / 1e12:g} TFLOPS ({gpu_model}, {dtype}, dense)"
    )
    return Mfu(value, "measured", basis)


def proxy_mfu(tensor_active: float | None) -> Mfu | None:
    """DCGM's tensor-pipe activity as the labelled proxy, None where it is not reported."""
    if tensor_active is None:
        return None
    return Mfu(tensor_active, "proxy", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, allocation-weighted")
