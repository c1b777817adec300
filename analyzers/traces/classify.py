"""GPU kernel classes by name: HTA 0.5.0's (`hta/utils/utils.py` `get_kernel_type`, `_HTA_050_*`)
and fleetscope's: HTA HEAD's (`hta/common/types.py`: adds `^hip`, `^hccl`, `ncclKernel`, ...) plus
the custom communication families (DeepEP `dpsk::ep::`, NVSHMEM, all-to-all) that
trace-semantics.md section 2 shows HTA miscounting as compute.
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
    """HTA HEAD's classes, custom collectives as communication (not compute; overlap not NaN)."""
    if _COMMUNICATION.search(name):
        return KernelClass.COMMUNICATION
    if _MEMORY.match(name):
        return KernelClass.MEMORY
    if _OTHER.match(name):
        return KernelClass.OTHER
    return KernelClass.COMPUTATION
