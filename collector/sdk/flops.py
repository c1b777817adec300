"""Model FLOPs of one training step, counted by PyTorch itself: the numerator of measured MFU.

`step_flops(step)` runs `step()` once under `torch.utils.flop_counter.FlopCounterMode`, which
counts the FLOPs of every matmul, convolution and attention op PyTorch dispatches (forward and
backward) from their shapes, the same formulas as the profiler's `with_flops=True`. Run it on a
representative step (the shapes decide the count, not the values); its count times the steps per
second of the step metrics is the achieved model FLOP rate. Counted ops are those torch has
formulas for: elementwise ops (activations, norms) are not counted, as MFU conventions leave
them out (PaLM appendix B counts matmuls only).

torch is imported on call only (the SDK's import stays standard-library only).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def step_flops(step: Callable[[], Any]) -> int:
    """The FLOPs `step()` dispatched (forward, backward and optimizer matmuls)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        step()
    return int(counter.get_total_flops())
