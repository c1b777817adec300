"""HTA 0.5.0's load rules (trace-semantics.md section 1), only in --hta-compatible mode. Every HTA
number depends on them, so they are copied exactly, quirks included:

1. Rank: HTA's first text match of `"rank":\\s+(\\d+)`, else 0; a later file with the same rank
   replaces an earlier one (files are taken in sorted order; HTA takes `os.listdir` order).
2. Kept rows: events with `dur` and `cat`, `cat != "Trace"` (done by the loader).
3. ns rounding: when pandas would hold `ts` as floats (any float or missing `ts`),
   `end = floor(ts + dur)`, `ts = ceil(ts)`, `dur = end - ts` (durations can become 0 or < 0).
4. `index_correlation`: CPU and GPU rows sharing a `correlation` point at each other; on a
   many-to-many match the last write wins. GPU = `(stream >= 0 and correlation >= 0)` or named
   `Event Sync`/`Context Sync`.
5. Alignment: `ts -= min(ts)` over all ranks.
6. Iteration filter, when more than one symbol contains `ProfilerStep`: CPU rows starting before
   the last ProfilerStep are kept (HTA's default `include_last_profiler_step=False`), after the
   GPU rows, each once per kept CPU row of its correlation (an inner merge: duplicates possible).
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from dataclasses import replace
from pathlib import Path

import numpy as np

from analyzers.traces.classify import classify_hta_050
from analyzers.traces.frame import ROW_COLUMNS, Mask, Mode, RankFrame, TraceSet, gather_ranks
from analyzers.traces.load import RawTrace
from analyzers.traces.stats import join_rows

_SYNC_NAMES = frozenset({"Event Sync", "Context Sync"})


def hta_gpu_filter(frame: RankFrame) -> Mask:
    """HTA's `GPUKernelFilter`: on a stream with a correlation, or a device-wide sync."""
    return ((frame.stream >= 0) & (frame.correlation >= 0)) | frame.name_in(_SYNC_NAMES)


def _filter_iterations(frame: RankFrame, step_names: set[str]) -> RankFrame:
    """Rule 6 (`Trace._filter_irrelevant_gpu_kernels`, 0.5.0, default arguments)."""
    gpu = hta_gpu_filter(frame)
    cpu = ~gpu
    steps = cpu & frame.name_in(step_names)
    last_start = frame.ts[steps].max() if steps.any() else np.nan
    cpu_rows = np.flatnonzero(cpu & (frame.ts < last_start))
    gpu_rows = np.flatnonzero(gpu)
    # Each GPU row once per kept CPU row with its correlation (an inner merge's multiplicity).
    merged, _ = join_rows(frame.correlation[gpu_rows], frame.correlation[cpu_rows])
    rows = np.concatenate([gpu_rows[merged], cpu_rows]).astype(np.int64)
    columns = {key: getattr(frame, key)[rows] for key in (*ROW_COLUMNS, "index_correlation")}
    return replace(frame, memo={}, **columns)  # the memory counters stay whole


def hta_rank_frame(raw: RawTrace) -> RankFrame:
    """One file's frame under its HTA rank (rules 1, 3 and 4)."""
    rank = raw.hta_rank if raw.hta_rank is not None else 0
    ts, dur = raw.ts, raw.dur
    if raw.ts_has_float or not raw.ts_all_present:
        end = np.floor(ts + dur)
        ts = np.ceil(ts)
        dur = end - ts
    frame = RankFrame.of_raw(raw, rank, classify_hta_050, ts=ts, dur=dur, ts_int=raw.ts_all_present)
    linked, gpu = frame.correlation != -1, hta_gpu_filter(frame)  # rule 4 (HTA's trace.py)
    rows = np.flatnonzero(linked & ~gpu), np.flatnonzero(linked & gpu)
    frame.index_correlation = frame.link(*rows, np.minimum(frame.correlation, 0))
    return frame


def prepare_hta(
    rank_frames: Iterable[RankFrame],
    frames: MutableMapping[int, RankFrame] | None = None,
) -> TraceSet:
    """A `TraceSet` from `hta_rank_frame`s in file order (later wins a rank, rule 1), aligned
    and filtered (rules 5, 6) one rank at a time."""
    notes: list[str] = []

    def replaced(rank: int, earlier: Path, later: Path) -> None:
        notes.append(
            f"HTA rank {rank}: {earlier.name} replaced by {later.name} "
            "(HTA keeps the later file of a rank)"
        )

    frames, source, min_ts = gather_ranks(rank_frames, frames, replaced)
    steps = {s for rank in frames for s in frames[rank].names if "ProfilerStep" in s}
    for rank in sorted(frames):
        frame = replace(frames[rank], ts=frames[rank].ts - min_ts)
        frames[rank] = _filter_iterations(frame, steps) if len(steps) > 1 else frame
        del frame
    return TraceSet(Mode.HTA, frames, source, origin_us=min_ts, notes=notes)
