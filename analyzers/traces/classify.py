"""GPU kernel classes by name: HTA 0.5.0's rules, and fleetscope's (which count custom
communication kernels as communication). A registry of named classifiers, chosen per run.

Sources: HTA 0.5.0 `hta/utils/utils.py` (COMMUNICATION `^nccl.*Kernel`, MEMORY
`(^Memcpy)|(^Memset)|(^dma)`, COMPUTATION unless `(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)`,
else OTHER) and HTA HEAD `hta/common/types.py` (adds `^hip`, `^hccl`, `ncclKernel`, ...); the
custom communication families (DeepEP `dpsk::ep::`, NVSHMEM, all-to-all) are what
trace-semantics.md section 2 shows HTA miscounting as compute. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import IntEnum

__all__ = ["CLASSIFIERS", "Classifier", "KernelClass", "classify_fleetscope", "classify_hta_050"]


class KernelClass(IntEnum):
    COMPUTATION = 0
    COMMUNICATION = 1
    MEMORY = 2
    OTHER = 3


Classifier = Callable[[str], KernelClass]

_HTA_COMM = re.compile(r"^nccl.*Kernel")
_HTA_MEM = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_HTA_NOT_COMP = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")


def classify_hta_050(name: str) -> KernelClass:
    """Exactly HTA 0.5.0's `get_kernel_type` (note `re.match`: anchored at the start)."""
    if _HTA_COMM.match(name):
        return KernelClass.COMMUNICATION
    if _HTA_MEM.match(name):
        return KernelClass.MEMORY
    if not _HTA_NOT_COMP.match(name):
        return KernelClass.COMPUTATION
    return KernelClass.OTHER


_COMM = re.compile(
    r"(^nccl)|(ncclKernel)|(^hccl)|(^rccl)|(dpsk::ep::)|(nvshmem)|(all_?to_?all)|(allgather)"
    r"|(reduce_?scatter)|(all_?reduce)|(^c10d::)|(^msccl)",
    re.IGNORECASE,
)
_MEM = re.compile(r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)")
_NOT_COMP = re.compile(
    r"(^.*Sync)|(^Stream Wait Event)|(cuda.*LaunchKernel)|(^runFunction)|(^hip)|(^job_exe)"
    r"|(^packet)|(^pe_exe)|(^cpum_exe_subgraph)|(^collective_subgraph_execution)"
)


def classify_fleetscope(name: str) -> KernelClass:
    """HTA HEAD's classes plus custom collectives (DeepEP, NVSHMEM, all-to-all) as
    communication, so their time is not reported as compute and overlap is not NaN."""
    if _COMM.search(name):
        return KernelClass.COMMUNICATION
    if _MEM.match(name):
        return KernelClass.MEMORY
    if _NOT_COMP.match(name):
        return KernelClass.OTHER
    return KernelClass.COMPUTATION


CLASSIFIERS: dict[str, Classifier] = {
    "hta-0.5.0": classify_hta_050,
    "fleetscope": classify_fleetscope,
}
