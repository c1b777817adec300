"""Which compute kernels ran on tensor cores: a kernel whose name holds one of the patterns,
whichever names of CPU ops the trace also has (analyses/tensor_cores.py tests kernels' names
only)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analyzers.traces.analyses.tensor_cores import TC_KERNEL, tensor_core_names
from analyzers.traces.classify import KernelClass
from tests.analyzers.traces.trace_paths import ALL_TRACES, trace_set


@pytest.mark.parametrize("trace_dir", ALL_TRACES, ids=lambda p: p.name)
@pytest.mark.parametrize("hta_compatible", [True, False])
def test_the_kernels_on_tensor_cores_are_those_whose_name_holds_a_pattern(
    trace_dir: Path, hta_compatible: bool
) -> None:
    for frame in trace_set(trace_dir, hta_compatible=hta_compatible).frames():
        compute = frame.of_class(KernelClass.COMPUTATION)
        by_name = np.array([bool(TC_KERNEL.search(frame.names[c])) for c in frame.name], bool)
        assert (tensor_core_names(frame, frame.name[compute]) == by_name[compute]).all()


def test_a_kernel_name_holds_a_pattern_anywhere() -> None:
    assert TC_KERNEL.search("sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64")
    assert TC_KERNEL.search("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128>")
    assert not TC_KERNEL.search("void at::native::vectorized_elementwise_kernel<4>")
