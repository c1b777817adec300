"""GPU kernel classes by name: HTA 0.5.0's rules, and fleetscope's (which count custom
communication kernels as communication).

Sources: HTA 0.5.0 `hta/utils/utils.py` `get_kernel_type` (its three patterns, `_HTA_050_*`)
and HTA HEAD `hta/common/types.py` (adds `^hip`, `^hccl`, `ncclKernel`, ...); the custom
communication families (DeepEP `dpsk::ep::`, NVSHMEM, all-to-all) are what trace-semantics.md
section 2 shows HTA miscounting as compute. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import IntEnum


class KernelClass(IntEnum):
    COMPUTATION = 0
    COMMUNICATION = 1
    MEMORY = 2
    OTHER = 3


Classifier = Callable[[str], KernelClass]

_HTA_050_COMMUNICATION = re.compile(r"^nccl.*Kernel")
_HTA_050_MEMORY = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_HTA_050_NOT_COMPUTATION = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")


def classify_hta_050(name: str) -> KernelClass:
    """Exactly HTA 0.5.0's `get_kernel_type` (note `re.match`: anchored at the start)."""
    if _HTA_050_COMMUNICATION.match(name):
        return KernelClass.COMMUNICATION
    if _HTA_050_MEMORY.match(name):
        return KernelClass.MEMORY
    if not _HTA_050_NOT_COMPUTATION.match(name):
        return KernelClass.COMPUTATION
    return KernelClass.OTHER


_COMMUNICATION = re.compile(
    r"(^nccl)|(ncclKernel)|(^hccl)|(^rccl)|(dpsk::ep::)|(nvshmem)|(all_?to_?all)"
    r"|(allgather)|(reduce_?scatter)|(all_?reduce)|(^c10d::)|(^msccl)",
    re.IGNORECASE,
)
_MEMORY = re.compile(r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)")
_OTHER = re.compile(
    r"(^.*Sync)|(^Stream Wait Event)|(cuda.*LaunchKernel)|(^runFunction)|(^hip)|(^job_exe)"
    r"|(^packet)|(^pe_exe)|(^cpum_exe_subgraph)|(^collective_subgraph_execution)"
)


def classify_fleetscope(name: str) -> KernelClass:
    """HTA HEAD's classes plus custom collectives (DeepEP, NVSHMEM, all-to-all) as
    communication, so their time is not reported as compute and overlap is not NaN."""
    if _COMMUNICATION.search(name):
        return KernelClass.COMMUNICATION
    if _MEMORY.match(name):
        return KernelClass.MEMORY
    if _OTHER.match(name):
        return KernelClass.OTHER
    return KernelClass.COMPUTATION
