"""Integer bucket counts over a dense, growable key window: the part of a quantile sketch that merges.

Counts are int64 and only ever added or subtracted whole, so a store built by any mix of ingests,
merges and window slides holds exactly the counts of the values it saw: no drift, no rounding
(`../shared/sketches.md`, "Panes"). The backing array keeps slack on both sides so that a stream
whose range widens slowly does not reallocate on every batch; `trimmed()` gives the canonical view
(first and last count non-zero) that serialization and comparisons use.

This module never sees values, only keys (see analyzers/sketch/mapping.py), and never allocates per
value.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["CountStore"]

Counts = npt.NDArray[np.int64]

_MIN_SLACK = 64
_EMPTY: Counts = np.zeros(0, dtype=np.int64)  # shared; never written: _cover replaces it


class CountStore:
    """Counts for keys `base .. base + len(counts) - 1`; keys outside hold zero."""

    __slots__ = ("base", "counts", "hi", "lo", "total")

    def __init__(self) -> None:
        self.counts: Counts = np.zeros(0, dtype=np.int64)
        self.base = 0
        # Keys outside [lo, hi] are certainly zero; inside, zeros may remain after subtraction.
        self.lo = 0
        self.hi = -1
        self.total = 0

    def copy(self) -> CountStore:
        """An independent store with the same counts, trimmed to the used keys."""
        new = CountStore.__new__(CountStore)
        new.counts, new.base, new.lo, new.hi, new.total = _EMPTY, 0, 0, -1, 0
        if self.total:
            new.base = self.lo
            new.counts = self.counts[self.lo - self.base : self.hi + 1 - self.base].copy()
            new.lo, new.hi, new.total = self.lo, self.hi, self.total
        return new

    def _cover(self, key_lo: int, key_hi: int) -> None:
        """Make the backing array span [key_lo, key_hi], keeping slack for later growth."""
        base, size = self.base, len(self.counts)
        if base <= key_lo and key_hi < base + size:
            return
        if self.total == 0 and self.hi < self.lo:
            lo, hi = key_lo, key_hi
        else:
            lo, hi = min(key_lo, self.lo), max(key_hi, self.hi)
        slack = max(_MIN_SLACK, (hi - lo + 1) // 4)
        new_base = lo - slack
        grown = np.zeros(hi - lo + 1 + 2 * slack, dtype=np.int64)
        if self.hi >= self.lo:
            start = self.lo - new_base
            grown[start : start + self.hi - self.lo + 1] = self.counts[
                self.lo - base : self.hi + 1 - base
            ]
        self.counts = grown
        self.base = new_base

    def add(self, key_lo: int, counts: Counts, total: int) -> None:
        """Add `counts` for keys `key_lo ..`; `total` is their sum (the caller knows it already)."""
        if total == 0:
            return
        key_hi = key_lo + len(counts) - 1
        self._cover(key_lo, key_hi)
        start = key_lo - self.base
        view = self.counts[start : start + len(counts)]
        view += counts  # in place on the view: half the cost of `counts[a:b] += ...` here
        if self.hi < self.lo:
            self.lo, self.hi = key_lo, key_hi
        else:
            self.lo = min(self.lo, key_lo)
            self.hi = max(self.hi, key_hi)
        self.total += total

    def merge(self, other: CountStore) -> None:
        """Add another store's counts (lossless)."""
        if not other.total:
            return
        lo, hi, base = other.lo, other.hi, self.base
        part = other.counts[lo - other.base : hi + 1 - other.base]
        if not (base <= lo and hi < base + len(self.counts)):
            self.add(lo, part, other.total)
            return
        # Inside the backing array already (the usual case once a merge target has grown): the
        # body of `add` without its two calls; a merge is a few microseconds, calls are most of it.
        view = self.counts[lo - base : hi + 1 - base]
        view += part
        if self.hi < self.lo:
            self.lo, self.hi = lo, hi
        else:
            if lo < self.lo:
                self.lo = lo
            if hi > self.hi:
                self.hi = hi
        self.total += other.total

    def subtract(self, other: CountStore) -> None:
        """Remove counts earlier added from `other` (a sliding window's leaving pane)."""
        if other.total == 0:
            return
        if other.lo < self.lo or other.hi > self.hi or other.total > self.total:
            raise ValueError("subtracting counts this store never held")
        start = other.lo - self.base
        part = other.counts[other.lo - other.base : other.hi + 1 - other.base]
        self.counts[start : start + len(part)] -= part
        self.total -= other.total
        if self.total == 0:
            self.lo, self.hi = 0, -1

    def used(self) -> tuple[int, Counts]:
        """(first key, counts) over the used window; may have zeros at the ends after subtraction."""
        if self.hi < self.lo:
            return 0, self.counts[:0]
        return self.lo, self.counts[self.lo - self.base : self.hi + 1 - self.base]

    def trimmed(self) -> tuple[int, Counts]:
        """(first key, counts) with the first and last count non-zero: the canonical content."""
        lo, counts = self.used()
        if len(counts) == 0 or (counts[0] and counts[-1]):
            return lo, counts
        nonzero = np.flatnonzero(counts)
        return lo + int(nonzero[0]), counts[nonzero[0] : nonzero[-1] + 1]
