"""Tensor-core use (rule T10), after the TensorBoard plugin's `tensor_core.py`; HTA has none.

A kernel uses tensor cores when its name holds one of the plugin's patterns (from NVIDIA PyProf:
`h884`, `s1688`, `hmma`, `16816`, `xmma_gemm`, ...; plus the CUTLASS `tensorop`, cuBLAS `nvjet`
and sm90/sm100 families, FP8/FP4 GEMMs (E4m3/E2m1) and fused attention, which the plugin
predates). It is eligible when the operator that launched it (by `External id`) is one the plugin
(from autocast's fp16 list) lists. Reported: eligible kernel time, the part on tensor cores, and
the GPU's compute capability (tensor cores exist from 7.0).
"""

from __future__ import annotations

import math
import re

import numpy as np

from analyzers.traces.analyses.base import RankRows, TraceOptions, analysis, rank_by_rank
from analyzers.traces.classify import KernelClass
from analyzers.traces.frame import CPU_OP_CATS, Mask, RankFrame
from analyzers.traces.hardware import gpu_of

PLUGIN_ORDER = 150  # its place in the trace report (fleetscope.plugins)
TC_KERNEL = re.compile(
    r"h884|s884|h1688|s1688|hmma|i8816|16816|dgrad_1x1_stride_2x2|first_layer_wgrad_kernel"
    r"|conv1x1|conv2d_c1_k1|direct_group|xmma_implicit_gemm|xmma_sparse_conv"
    r"|xmma_warp_specialized_implicit_gemm|xmma_gemm|xmma_sparse_gemm|c1688"
    r"|tensorop|sm80_xmma|sm90_xmma|gmma|wgmma|mma_|nvjet|fmha|flash_fwd|flash_bwd|tcgen05"
    r"|sm90_|sm100|E4m3|E2m1"
)
TC_OPS = re.compile(  # matched whole
    r"aten::(_?convolution|_convolution_nogroup|conv_tbc|cudnn_convolution(_transpose)?|prelu"
    r"|addmm|addmv|addr|matmul|mm|mv|linear|addbmm|baddbmm|bmm|chain_matmul|linalg_multi_dot"
    r"|(_thnn_fused_)?(lstm|gru)_cell|rnn_(tanh|relu)_cell|(cudnn_)?convolution_backward"
    r"|conv(_transpose)?[123]d)"
    r"|(CudnnConvolution|Mm|Addmm|Bmm)Backward0?"
    r"|autograd::engine::evaluate_function: (Convolution|Addmm|Mm|Bmm)Backward0"
)
COLUMNS = (
    "rank",
    "compute_capability",
    "compute_kernel_us",
    "tc_eligible_us",
    "tensor_core_us",
    "tc_share_of_eligible",
)
KEYS = ("compute_capability", "compute_us", "eligible_us", "tensor_core_us", "tensor_core_share")


def tensor_core_names(frame: RankFrame, codes: np.ndarray) -> Mask:
    """Whether the name of each code holds a `TC_KERNEL` pattern (-1: no), each name tested once
    per rank and only if asked (this and the what-if ask; most names are CPU ops')."""
    known: dict[int, bool] = frame.memo.setdefault("tensor_core_names", {})
    for code in set(codes.tolist()) - known.keys():
        known[code] = code >= 0 and TC_KERNEL.search(frame.names[code]) is not None
    hit = np.zeros(len(frame.names) + 1, dtype=bool)  # the last: symbol -1, no name
    hit[list(known)] = list(known.values())
    found: Mask = hit[codes]
    return found


@analysis("tensor_cores", "Tensor-core use", None, "HTA has none")
@rank_by_rank("tensor_cores", COLUMNS)
def tensor_cores(frame: RankFrame, options: TraceOptions) -> RankRows:
    compute = frame.of_class(KernelClass.COMPUTATION)
    tc = compute.copy()
    tc[compute] = tensor_core_names(frame, frame.name[compute])
    # eligible: launched by a tensor-core-eligible operator (by External id), or on them
    ids = frame.external_id[frame.cat_in(CPU_OP_CATS) & frame.names_matching(TC_OPS.fullmatch)]
    eligible = (compute & np.isin(frame.external_id, ids[ids >= 0])) | tc
    compute_us, eligible_us, tc_us = (float(frame.dur[m].sum()) for m in (compute, eligible, tc))
    cc = gpu_of(frame.device_properties).compute_capability
    share = tc_us / eligible_us if eligible_us else math.nan
    values = (cc, compute_us, eligible_us, tc_us, share)
    return RankRows([(frame.rank, *values)], dict(zip(KEYS, values, strict=True)))
