"""GPU kernel classes by name: HTA 0.5.0's rules, and fleetscope's (which count custom
communication kernels as communication). A registry of named classifiers, chosen per run.

Sources: HTA 0.5.0 `hta/utils/utils.py` (COMMUNICATION `^nccl.*Kernel`, MEMORY
`(^Memcpy)|(^Memset)|(^dma)`, COMPUTATION unless `(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)`,
else OTHER) and HTA HEAD `hta/common/types.py` (adds `^hip`, `^hccl`, `ncclKernel`, ...); the
custom communication families (DeepEP `dpsk::ep::`, NVSHMEM, all-to-all) are what
trace-semantics.md section 2 shows HTA miscounting as compute. Pure functions, no I/O.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from enum import IntEnum

__all__ = ["Classifier", "KernelClass", "classify_fleetscope", "classify_hta_050"]


class KernelClass(IntEnum):
    COMPUTATION = 0
    COMMUNICATION = 1
    MEMORY = 2
    OTHER = 3


Classifier = Callable[[str], KernelClass]

# Each classifier's patterns are compiled on its first call: a run uses one of the two, and
# compiling all six at import cost ~1 ms of every `fleetscope trace analyze` (issue 19).


@functools.cache
def _hta_050_patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    return (
        re.compile(r"^nccl.*Kernel"),
        re.compile(r"(^Memcpy)|(^Memset)|(^dma)"),
        re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)"),
    )


def classify_hta_050(name: str) -> KernelClass:
    """Exactly HTA 0.5.0's `get_kernel_type` (note `re.match`: anchored at the start)."""
    comm, mem, not_comp = _hta_050_patterns()
    if comm.match(name):
        return KernelClass.COMMUNICATION
    if mem.match(name):
        return KernelClass.MEMORY
    if not not_comp.match(name):
        return KernelClass.COMPUTATION
    return KernelClass.OTHER


@functools.cache
def _fleetscope_patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    return (
        re.compile(
            r"(^nccl)|(ncclKernel)|(^hccl)|(^rccl)|(dpsk::ep::)|(nvshmem)|(all_?to_?all)"
            r"|(allgather)|(reduce_?scatter)|(all_?reduce)|(^c10d::)|(^msccl)",
            re.IGNORECASE,
        ),
        re.compile(r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)"),
        re.compile(
            r"(^.*Sync)|(^Stream Wait Event)|(cuda.*LaunchKernel)|(^runFunction)|(^hip)|(^job_exe)"
            r"|(^packet)|(^pe_exe)|(^cpum_exe_subgraph)|(^collective_subgraph_execution)"
        ),
    )


# The communication pattern's words, for ASCII names (kernel names are; where IGNORECASE is a
# plain lower()): a prefix and substring test per word is ~100x faster than the case-folding
# alternation, which was ~60 us per long kernel name (10 ms of trace_diff_control's native run,
# issue 19). Other names go to the pattern itself.
_COMMUNICATION_PREFIXES = ("nccl", "hccl", "rccl", "c10d::", "msccl")
_COMMUNICATION_WORDS = (
    "ncclkernel", "dpsk::ep::", "nvshmem", "alltoall", "all_toall", "allto_all", "all_to_all",
    "allgather", "reducescatter", "reduce_scatter", "allreduce", "all_reduce",
)  # fmt: skip


def _is_communication(name: str, pattern: re.Pattern[str]) -> bool:
    """`pattern.search(name)` for the first of `_fleetscope_patterns`."""
    if not name.isascii():
        return pattern.search(name) is not None
    low = name.lower()
    return low.startswith(_COMMUNICATION_PREFIXES) or any(w in low for w in _COMMUNICATION_WORDS)


def classify_fleetscope(name: str) -> KernelClass:
    """HTA HEAD's classes plus custom collectives (DeepEP, NVSHMEM, all-to-all) as
    communication, so their time is not reported as compute and overlap is not NaN."""
    comm, mem, not_comp = _fleetscope_patterns()
    if _is_communication(name, comm):
        return KernelClass.COMMUNICATION
    if mem.match(name):
        return KernelClass.MEMORY
    if not_comp.match(name):
        return KernelClass.OTHER
    return KernelClass.COMPUTATION
