"""A large multi-rank set's frames kept in `.npy` files between uses, so the peak grows with the
largest rank, not the set: a rank is memory-mapped when asked for and unmapped when the next one
is, the rest lies in the page cache. The maps hold the very values (same dtype, same bytes) the
in-memory set holds, so every output is the same.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from collections.abc import Iterator, MutableMapping
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from analyzers.traces.frame import MEM_COLUMNS, ROW_COLUMNS, RankFrame

# Sets whose files hold more bytes than this spill. Below it a set's frames are a few hundred
# MiB at most (the 200 MB 8-rank set peaked at 130 MiB held); writing them out only adds time.
SPILL_OVER_BYTES = 512 * 1024 * 1024
_ARRAYS = (*ROW_COLUMNS, "index_correlation", *MEM_COLUMNS)
_SCALARS = tuple(f.name for f in fields(RankFrame) if f.name not in _ARRAYS)
_PREFIX = "fleetscope-ranks-"  # then the owning process's id


def _remove_orphans(parent: Path) -> None:
    """Remove the folders of killed runs (no finalizer ran): those whose owner is gone."""
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
    """Rank -> `RankFrame` in files under a temporary folder that goes with this object. Setting
    a rank writes its frame; getting one maps it (repeated reads of one rank map it once)."""

    def __init__(self, folder: Path | None = None) -> None:
        parent = Path(folder or tempfile.gettempdir())
        _remove_orphans(parent)
        self._folder = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=parent))
        self._finalizer = weakref.finalize(self, shutil.rmtree, self._folder, True)
        self._stored: dict[int, tuple[Path, dict[str, Any]]] = {}  # its folder, its scalars
        self._last: dict[int, RankFrame] = {}  # the last rank got, mapped

    def __setitem__(self, rank: int, frame: RankFrame) -> None:
        # A new folder each time: the frame written may be a map of the rank's current files,
        # and truncating a mapped file faults its readers; an unlinked one stays mapped.
        rank_folder = Path(tempfile.mkdtemp(prefix=f"{rank}.", dir=self._folder))
        for key in _ARRAYS:
            np.save(rank_folder / f"{key}.npy", getattr(frame, key), allow_pickle=False)
        if rank in self._stored:
            del self[rank]
        self._stored[rank] = rank_folder, {key: getattr(frame, key) for key in _SCALARS}

    def __getitem__(self, rank: int) -> RankFrame:
        if rank in self._last:
            return self._last[rank]
        rank_folder, scalars = self._stored[rank]  # KeyError for an unknown rank, as a dict's
        self._last = {}  # the previous rank's maps go before this one's are made
        # np.asarray: a plain ndarray over the map (np.memmap would wrap what is computed from it).
        arrays: dict[str, Any] = {
            key: np.asarray(np.load(rank_folder / f"{key}.npy", mmap_mode="r")) for key in _ARRAYS
        }
        frame = RankFrame(**scalars, **arrays)
        self._last = {rank: frame}
        return frame

    def __delitem__(self, rank: int) -> None:
        rank_folder, _ = self._stored.pop(rank)
        self._last.pop(rank, None)
        shutil.rmtree(rank_folder, ignore_errors=True)

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self._stored))  # rank order, as the in-memory sets are built

    def __len__(self) -> int:
        return len(self._stored)
