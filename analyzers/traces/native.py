"""fleetscope's own preparation of a trace (the default). Where it differs from HTA's load rules
(hta_rules.py) and why:

- Timestamps stay exact (float microseconds): HTA's ns rounding turns a 0.4 us kernel into a
  negative duration and shifts every interval by up to 1 us.
- Every ProfilerStep is kept: HTA drops the whole last step whenever there are two or more, which
  on a 2-step capture throws away half the data.
- The rank is `distributedInfo.rank` (what the profiler wrote), then HTA's text match, then 0;
  two files claiming one rank is an error instead of silently dropping one.
- A GPU op is linked to its launching runtime/driver call only (`cuda_runtime`, `cuda_driver`,
  `Runtime`), not to whatever CPU row shares its correlation id.
- Custom collectives (DeepEP, NVSHMEM, all-to-all) are communication (classify.py).
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from dataclasses import replace
from pathlib import Path

import numpy as np

from analyzers.traces.classify import classify_fleetscope
from analyzers.traces.frame import (
    GPU_OP_CATS,
    RUNTIME_CATS,
    Mode,
    RankFrame,
    TraceSet,
    gather_ranks,
    last_row_per_key,
)
from analyzers.traces.load import RawTrace
from fleetscope.errors import TraceError


def native_rank_frame(raw: RawTrace) -> RankFrame:
    """One file's frame under its rank; each GPU op and the (last) runtime/driver call with its
    correlation point at each other (the call: at the last op)."""
    frame = RankFrame.of_raw(raw, raw.rank, classify_fleetscope)
    corr = frame.correlation
    gpu = (corr >= 0) & (frame.stream >= 0) & frame.cat_in(GPU_OP_CATS)
    calls = np.flatnonzero((corr >= 0) & frame.cat_in(RUNTIME_CATS))
    last_calls = np.sort(last_row_per_key(corr[calls], calls)[1])
    unlinked = np.full(len(frame), -1, dtype=np.int64)
    frame.index_correlation = frame.link(last_calls, np.flatnonzero(gpu), unlinked)
    return frame


def prepare_native(
    rank_frames: Iterable[RankFrame],
    frames: MutableMapping[int, RankFrame] | None = None,
) -> TraceSet:
    """A `TraceSet` from `native_rank_frame`s, aligned one rank at a time."""
    frames, source, origin = gather_ranks(rank_frames, frames, _refuse)
    for rank in sorted(frames):
        frame = frames[rank]
        frames[rank] = replace(frame, ts=frame.ts - origin, mem_ts=frame.mem_ts - origin)
        del frame
    return TraceSet(Mode.NATIVE, frames, source, origin_us=origin)


def _refuse(rank: int, earlier: Path, later: Path) -> None:
    raise TraceError(
        f"{earlier.name} and {later.name} both claim rank {rank}; "
        "analyze them separately (one folder per profiling session)"
    )
