"""A large multi-rank set's frames kept in files between uses, one rank in memory at a time.

Why: the cross-rank analyses (alignment, the iteration filter, stragglers, the set's kernel
tables) need every rank, and holding every rank's frame made the peak grow with the set (4 GB
set: 1.94 GiB, 16 GB: 7.2 GiB; issue 29 asks that it grow with the largest rank). Here each
prepared frame's columns are written as `.npy` files in a temporary folder, and a rank is
memory-mapped when an analysis asks for it and unmapped when the next rank is asked for, so the
process holds about one rank (two while a loop moves from one to the next), and the rest lies
in the page cache, which the kernel may drop and re-read.

The arrays an analysis gets are read-only maps of the very values the in-memory set holds (same
dtype, same bytes), so every output is the same (tests/analyzers/traces/test_traces_spill.py).
Used for sets whose files are larger than `SPILL_OVER_BYTES` together (api.load_trace_set).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import numpy as np

from analyzers.traces.frame import ROW_COLUMNS, RankFrame

__all__ = ["SPILL_OVER_BYTES", "SpilledFrames"]

# Sets of more than this many bytes of files spill. Below it the whole set's frames are a few
# hundred MiB at most (the 200 MB 8-rank set peaked at 130 MiB held), and writing them out would
# only add time.
SPILL_OVER_BYTES = 512 * 1024 * 1024
_ARRAYS = (*ROW_COLUMNS, "index_correlation", "mem_ts", "mem_device_type", "mem_total_allocated")
_SCALARS = ("path", "metadata", "names", "rank", "classifier", "ts_int", "memo")
_PREFIX = "fleetscope-ranks-"  # then the owning process's id


def _remove_orphans(parent: Path) -> None:
    """Remove the folders of runs that were killed (SIGKILL, the OOM killer: no finalizer ran):
    those whose owning process is gone."""
    for path in parent.glob(f"{_PREFIX}*-*"):
        pid = path.name[len(_PREFIX) :].split("-")[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:  # alive, another user's
            pass


class SpilledFrames(MutableMapping[int, RankFrame]):
    """Rank -> `RankFrame`, the frames' columns in files under a temporary folder that goes
    with this object. Setting a rank writes its frame; getting one maps it (the last one got is
    kept, so repeated reads of one rank map it once)."""

    def __init__(self, folder: Path | None = None) -> None:
        parent = Path(folder or tempfile.gettempdir())
        _remove_orphans(parent)
        self._folder = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=parent))
        self._finalizer = weakref.finalize(self, shutil.rmtree, self._folder, True)
        self._scalars: dict[int, dict[str, Any]] = {}
        self._last: tuple[int, RankFrame] | None = None
        self._version = 0

    def __setitem__(self, rank: int, frame: RankFrame) -> None:
        # A new folder each time: the frame written may be a map of the rank's current files
        # (a frame of aligned `ts` and the other columns as they were), and truncating a mapped
        # file faults its readers. The old folder is unlinked; maps of it stay valid until
        # they go (Linux keeps an unlinked file's pages while it is mapped).
        self._version += 1
        rank_folder = self._folder / f"{rank}.{self._version}"
        rank_folder.mkdir()
        for key in _ARRAYS:
            np.save(rank_folder / f"{key}.npy", getattr(frame, key), allow_pickle=False)
        old = self._scalars.get(rank)
        self._scalars[rank] = {key: getattr(frame, key) for key in _SCALARS}
        self._scalars[rank]["folder"] = rank_folder
        if self._last is not None and self._last[0] == rank:
            self._last = None
        if old is not None:
            shutil.rmtree(old["folder"], ignore_errors=True)

    def __getitem__(self, rank: int) -> RankFrame:
        if self._last is not None and self._last[0] == rank:
            return self._last[1]
        scalars = dict(self._scalars[rank])  # KeyError for an unknown rank, as a dict's
        rank_folder = scalars.pop("folder")
        self._last = None  # the previous rank's maps go before this one's are made
        # np.asarray: a plain ndarray over the map (np.memmap would also wrap what is computed
        # from it), which keeps the map open while any view of it lives.
        arrays: dict[str, Any] = {
            key: np.asarray(np.load(rank_folder / f"{key}.npy", mmap_mode="r")) for key in _ARRAYS
        }
        frame = RankFrame(**scalars, **arrays)
        self._last = (rank, frame)
        return frame

    def __delitem__(self, rank: int) -> None:
        old = self._scalars.pop(rank)
        if self._last is not None and self._last[0] == rank:
            self._last = None
        shutil.rmtree(old["folder"], ignore_errors=True)

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self._scalars))  # rank order, as the in-memory sets are built

    def __len__(self) -> int:
        return len(self._scalars)

    def close(self) -> None:
        """Remove the files now (they also go when this object is collected)."""
        self._last = None
        self._finalizer()
