"""The ingest arithmetic under QuantileSketch (analyzers/sketch/core.py): one chunk of floats to
bucket counts in numpy, exact sums in 2**-1074 units, the kept top/bottom extremes, and the counts
of one `add` call held until the whole call succeeds. Split out of core.py to keep each module
small; nothing here depends on the scalar path (C or Python).
"""

from __future__ import annotations

import functools

import numpy as np
import numpy.typing as npt

from analyzers.sketch.counts import CountStore
from analyzers.sketch.mapping import LogLinearMapping, bits_to_float

_NONFINITE_BITS = 0x7FF0_0000_0000_0000  # bits of +inf; +NaN is above
_MIN_NORMAL_BITS = 1 << 52  # bits of 2**-1022; positive bits at or below are subnormal
_UNIT_BITS = 1074  # every finite float64 is an integer multiple of 2**-1074

Floats = npt.NDArray[np.float64]
Counts = npt.NDArray[np.int64]
Part = tuple[int, Counts, int]  # (first key, counts, their total)

# The reductions without numpy's Python-level wrappers: about 1 us per call saved on small batches.
_max = np.maximum.reduce
_min = np.minimum.reduce
_sum = np.add.reduce  # pairwise summation, the same as np.sum


def _units(values: Floats, magnitude: float) -> int:
    """numpy's pairwise sum of `values` as an exact integer of 2**-1074 units; `magnitude` bounds
    |value|, so that a sum that could overflow float64 is taken scaled down by 2**-128 instead."""
    if magnitude * values.size < 1e307:
        num, den = float(_sum(values)).as_integer_ratio()
        return num << (_UNIT_BITS + 1 - den.bit_length())
    num, den = float(np.sum(values * 2.0**-128)).as_integer_ratio()
    return (num << (_UNIT_BITS + 1 - den.bit_length())) << 128


@functools.cache
def _mapping(m: int) -> LogLinearMapping:
    """One (stateless) mapping per layout, shared by its sketches: same-layout merges can then
    check `is` instead of comparing fields."""
    return LogLinearMapping(m)


def _top_merge(top: list[float], other: list[float], k: int) -> list[float]:
    """The k largest of two descending lists, descending."""
    if not other:
        return top
    if len(top) == k and other[0] <= top[-1]:
        return top
    return sorted(top + other, reverse=True)[:k]


def _bottom_merge(bottom: list[float], other: list[float], k: int) -> list[float]:
    """The k smallest of two ascending lists, ascending."""
    if not other:
        return bottom
    if len(bottom) == k and other[0] >= bottom[-1]:
        return bottom
    return sorted(bottom + other)[:k]


def _chunk_top(top: list[float], chunk: Floats, k: int) -> list[float]:
    candidates = chunk[chunk > top[-1]] if len(top) == k else chunk
    if candidates.size > k:
        candidates = np.partition(candidates, candidates.size - k)[candidates.size - k :]
    return sorted(top + candidates.tolist(), reverse=True)[:k]


def _chunk_bottom(bottom: list[float], chunk: Floats, k: int) -> list[float]:
    candidates = chunk[chunk < bottom[-1]] if len(bottom) == k else chunk
    if candidates.size > k:
        candidates = np.partition(candidates, k - 1)[:k]
    return sorted(bottom + candidates.tolist())[:k]


def _fast_chunk(
    chunk: Floats, scratch: Counts, shift: int
) -> tuple[Part, int, float, float] | None:
    """(positive part, zeros, min, max) of a chunk of finite values >= +0.0 none of them subnormal;
    None when the chunk holds anything else (the general path then takes it)."""
    bits = chunk.view(np.int64)
    hi = int(_max(bits))
    lo = int(_min(bits))
    if lo < 0 or hi >= _NONFINITE_BITS:  # a sign bit (negative, -0.0), inf or NaN
        return None
    n = chunk.size
    buf = scratch[:n]
    if lo > 0:
        if lo <= _MIN_NORMAL_BITS:
            return None
        kmin = (lo - 1) >> shift
        np.subtract(bits, 1 + (kmin << shift), out=buf)
        np.right_shift(buf, shift, out=buf)
        return (kmin, np.bincount(buf), n), 0, bits_to_float(lo), bits_to_float(hi)
    if hi == 0:
        return (0, scratch[:0], 0), n, 0.0, 0.0
    # Zeros present: subtracting 1 wraps them to 2**64 - 1 (unsigned), so the unsigned minimum is
    # the smallest positive value's bits minus one, and a clamp puts all zeros in key kmax + 1.
    ubuf = buf.view(np.uint64)
    np.subtract(bits.view(np.uint64), np.uint64(1), out=ubuf)
    low = int(ubuf.min())
    if low < _MIN_NORMAL_BITS:
        return None
    kmin = low >> shift
    kmax = (hi - 1) >> shift
    np.minimum(ubuf, np.uint64((kmax + 1) << shift), out=ubuf)
    np.subtract(ubuf, np.uint64(kmin << shift), out=ubuf)
    np.right_shift(ubuf, np.uint64(shift), out=ubuf)
    counts = np.bincount(buf)
    zeros = int(counts[-1])
    return (kmin, counts[:-1], n - zeros), zeros, 0.0, bits_to_float(hi)


class _Pending:
    """Counts gathered by one `add` call, committed only once the whole call has succeeded."""

    __slots__ = ("parts", "store")

    def __init__(self) -> None:
        self.parts: list[Part] = []
        self.store: CountStore | None = None

    def append(self, part: Part) -> None:
        if part[2] == 0:
            return
        self.parts.append(part)
        if len(self.parts) >= 32:  # bound memory on huge calls: fold into one store
            store = self.store if self.store is not None else CountStore()
            for key_lo, counts, total in self.parts:
                store.add(key_lo, counts, total)
            self.parts = []
            self.store = store

    def commit(self, target: CountStore) -> None:
        if self.store is not None:
            target.merge(self.store)
        for key_lo, counts, total in self.parts:
            target.add(key_lo, counts, total)


class _Extremes:
    """Top-k and bottom-k of the union of a FIFO window of panes, by two-stack aggregation: each
    pane is merged O(1) times amortized, so a slide costs O(top_k), independent of the window."""

    __slots__ = ("_back", "_back_bottom", "_back_top", "_front", "_k")

    def __init__(self, k: int) -> None:
        self._k = k
        self._front: list[tuple[list[float], list[float]]] = []  # suffix aggregates, oldest last
        self._back: list[tuple[list[float], list[float]]] = []
        self._back_top: list[float] = []
        self._back_bottom: list[float] = []

    def push(self, top: list[float], bottom: list[float]) -> None:
        self._back.append((top, bottom))
        self._back_top = _top_merge(self._back_top, top, self._k)
        self._back_bottom = _bottom_merge(self._back_bottom, bottom, self._k)

    def pop(self) -> None:
        if not self._front:
            agg_top: list[float] = []
            agg_bottom: list[float] = []
            for top, bottom in reversed(self._back):
                agg_top = _top_merge(top, agg_top, self._k)
                agg_bottom = _bottom_merge(bottom, agg_bottom, self._k)
                self._front.append((agg_top, agg_bottom))
            self._back, self._back_top, self._back_bottom = [], [], []
        self._front.pop()

    def value(self) -> tuple[list[float], list[float]]:
        if not self._front:
            return self._back_top, self._back_bottom
        front_top, front_bottom = self._front[-1]
        return (
            _top_merge(front_top, self._back_top, self._k),
            _bottom_merge(front_bottom, self._back_bottom, self._k),
        )
