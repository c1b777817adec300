"""Value-error quantile sketches (AOMG-style): how fleetscope answers every percentile question.

Telemetry percentiles are read as values ("p99 step time is 840 ms"), and rank-error sketches (KLL,
REQ, t-digest) get heavy tails wrong by tens of percent (`../shared/sketches.md`, "Why value
error"). `QuantileSketch` bounds the *value* error instead, after the design of
`../shared/sketches.md` (itself after AOMG, Lim et al., ICDE 2020, arXiv 1906.00228):

- a log-linear histogram indexed straight from the float bits (analyzers/sketch/mapping.py):
  `relative_accuracy=0.01` gives 128 buckets per power of two and a 0.78 % worst-case bound;
- an exact zero count, a mirrored store for negatives, NaN counted and ignored, infinities refused
  with SketchError (a ValueError) before anything of the call is kept;
- every integer up to `2**(m + 1)` (256 at the default accuracy) answered exactly;
- the `top_k` largest and smallest raw values kept exactly (AOMG's raw tail values per
  sub-window): `max`, `min` and every quantile whose rank falls among them are exact;
- integer counts only, so `merge` is lossless: the buckets, counts, zero and NaN counts, top and
  bottom values, and so every quantile, `count`, `min` and `max`, are bit-identical to ingesting
  the union, whatever the split into `add` calls and the merge order.

`sum` is exact arithmetic over per-call partial sums: each `add` call (or flush of buffered
scalars) sums its values with numpy's pairwise float64 sum (error about log2(n) ulp of the
magnitudes summed), and the sketch adds those partial sums as exact integers of 2**-1074, rounding
once when read. So `sum` is identical under any
merge order and any window slide (sliding subtracts exactly), and independent of the split into
`add` calls whenever the partial sums are exact (integer-valued data like utilization); otherwise
it may differ from another split in the last bits. `to_bytes` carries it, so blobs of the same parts
merged in any order are byte-identical.

`SlidingQuantiles` keeps a window of N panes: the entering pane's counts are added and the leaving
pane's subtracted (O(buckets) per slide, independent of N), and the window's raw extremes are kept
by two-stack aggregation (amortized O(top_k) per slide). Window quantiles are never estimated from
per-pane quantiles.

Ingest runs in numpy only, over chunks that fit in L2: two reductions (bit min and max, which also
prove the chunk is finite, non-negative and free of subnormals), one subtract, one shift and one
`bincount` per chunk; negatives, NaN, -0.0 and subnormals take a slower general path per chunk.
`add(float)` buffers finite floats (SCALAR_BUFFER at a time) in a base class, the C type of
analyzers/sketch/_sketch_scalar.c where it was built, else analyzers/sketch/scalar.py (`SCALAR_PATH`
says which; both give bit-identical sketches), and flushes them through the same ingest.
This module must never compute a window quantile from pane quantiles, never keep the values it was
given (beyond the top_k extremes and a bounded scalar buffer), and never round a count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from analyzers.sketch.blob import _HEADER, _MAGIC, _SUM_HEADER, _decode
from analyzers.sketch.chunks import (
    Counts,
    Floats,
    _bottom_merge,
    _chunk_bottom,
    _chunk_top,
    _fast_chunk,
    _mapping,
    _Pending,
    _top_merge,
    _units,
)
from analyzers.sketch.codec import (
    encode_counts,
    encode_varints,
    zigzag,
)
from analyzers.sketch.counts import CountStore
from analyzers.sketch.mapping import mantissa_bits_for
from analyzers.sketch.ranks import _quantiles, _units_to_float
from analyzers.sketch.scalar import SCALAR_BUFFER
from analyzers.sketch.sliding import DEFAULT_RELATIVE_ACCURACY, DEFAULT_TOP_K, SlidingWindow
from fleetscope.errors import SketchError

SCALAR_PATH: Literal["c", "python"]
try:
    from analyzers.sketch._sketch_scalar import ScalarBuffer as _ScalarBuffer

    SCALAR_PATH = "c"
except ImportError:  # built without a compiler (an optional extension): the same type in Python
    from analyzers.sketch.scalar import ScalarBuffer as _ScalarBuffer  # type: ignore[assignment]

    SCALAR_PATH = "python"

__all__ = [
    "DEFAULT_RELATIVE_ACCURACY",
    "DEFAULT_TOP_K",
    "NEGATIVE_BUCKET_BASE",
    "SCALAR_BUFFER",
    "SCALAR_PATH",
    "ZERO_BUCKET",
    "QuantileSketch",
    "SlidingQuantiles",
]

# Bucket ids of `buckets()`, ordered like the values: negatives (most negative first), zero, positives.
ZERO_BUCKET = -(1 << 29)
NEGATIVE_BUCKET_BASE = -(1 << 30)

CHUNK = 65_536  # values per ingest chunk: 512 KiB of int64 temporaries, inside a 1 MiB L2

_INT_LIMIT = 1 << 1023  # Python ints below this convert to a finite float


class QuantileSketch(_ScalarBuffer):
    """A mergeable quantile sketch with relative value error <= `relative_accuracy`.

    `add` takes a float, an int or any array of numbers; NaN is counted in `nan_count` and
    ignored, an infinity raises SketchError and nothing of that call is kept. `quantiles(qs)`
    follows `np.quantile(method="inverted_cdf")`: the value at rank `ceil(q * count)`, within
    `relative_accuracy` of it (exact for zeros, small integers and the `top_k` extremes).
    """

    __slots__ = (
        "_bottom",
        "_k",
        "_map",
        "_nans",
        "_neg",
        "_pos",
        "_relative_accuracy",
        "_sum_units",
        "_top",
        "_zeros",
    )

    def __init__(
        self, relative_accuracy: float = DEFAULT_RELATIVE_ACCURACY, top_k: int = DEFAULT_TOP_K
    ) -> None:
        if not (isinstance(relative_accuracy, float | int) and 1e-6 <= relative_accuracy < 0.5):
            raise SketchError(
                f"relative_accuracy must be in [1e-6, 0.5), got {relative_accuracy!r}"
            )
        if not (isinstance(top_k, int) and 1 <= top_k <= 255):
            raise SketchError(f"top_k must be an integer in [1, 255], got {top_k!r}")
        self._relative_accuracy = float(relative_accuracy)
        self._map = _mapping(mantissa_bits_for(relative_accuracy))
        self._k = top_k
        self._pos = CountStore()
        self._neg = CountStore()
        self._zeros = 0
        self._nans = 0
        self._sum_units = 0
        self._top: list[float] = []  # the k largest values, descending
        self._bottom: list[float] = []  # the k smallest values, ascending

    # -- ingest -------------------------------------------------------------------------------

    # `add` is the base class's: an exact finite float is buffered there, everything else comes
    # to `_add_other`, and a full buffer calls `_flush`. Every read, merge, copy and array add
    # flushes first, so buffered values are never missed and keep the order they came in.

    def _add_other(self, values: float | npt.ArrayLike) -> None:
        """`add` of anything but a finite float: ints as floats, the rest as an array (NaN
        counted, infinities refused)."""
        if values.__class__ is int and -_INT_LIMIT < values < _INT_LIMIT:
            self.add(float(values))
            return
        self._add_array(values)

    def _flush(self) -> None:
        if self._scalar_count:
            self._ingest(np.frombuffer(self._take_scalars(), dtype=np.float64))

    def _add_array(self, values: float | npt.ArrayLike) -> None:
        try:
            arr = np.asarray(values)
            if arr.dtype.kind not in "biuf":
                raise TypeError(f"dtype {arr.dtype}")
            arr = arr.astype(np.float64, copy=False)
        except (TypeError, ValueError, OverflowError) as exc:
            raise SketchError(
                f"cannot add {type(values).__name__}: not finite float64 numbers ({exc})"
            ) from exc
        self._flush()
        self._ingest(arr.ravel())

    def _ingest(self, values: Floats) -> None:
        n = values.size
        if n == 0:
            return
        if not values.flags.c_contiguous:
            values = np.ascontiguousarray(values)
        k = self._k
        top, bottom = self._top, self._bottom
        pos, neg = _Pending(), _Pending()
        zeros = nans = units = 0
        scratch = np.empty(min(n, CHUNK), dtype=np.int64)
        shift = self._map.shift
        for start in range(0, n, CHUNK):
            chunk = values[start : start + CHUNK]
            fast = _fast_chunk(chunk, scratch, shift)
            if fast is not None:
                part, chunk_zeros, low, high = fast
                pos.append(part)
                zeros += chunk_zeros
                finite = chunk
            else:
                finite, chunk_nans, chunk_zeros = self._general_chunk(chunk, start, pos, neg)
                nans += chunk_nans
                zeros += chunk_zeros
                if finite.size == 0:
                    continue
                low, high = float(finite.min()), float(finite.max())
            units += _units(finite, max(high, -low))
            if len(top) < k or high > top[-1]:
                top = _chunk_top(top, finite, k)
            if len(bottom) < k or low < bottom[-1]:
                bottom = _chunk_bottom(bottom, finite, k)
        pos.commit(self._pos)
        neg.commit(self._neg)
        self._zeros += zeros
        self._nans += nans
        self._sum_units += units
        self._top, self._bottom = top, bottom

    def _general_chunk(
        self, chunk: Floats, offset: int, pos: _Pending, neg: _Pending
    ) -> tuple[Floats, int, int]:
        """Negatives, -0.0, NaN, subnormals: (finite values with -0.0 made +0.0, NaNs, zeros)."""
        is_nan = np.isnan(chunk)
        nans = int(np.count_nonzero(is_nan))
        finite = chunk[~is_nan] if nans else chunk
        if np.isinf(finite).any():
            where = int(np.flatnonzero(np.isinf(chunk))[0])
            raise SketchError(
                f"cannot add {float(chunk[where])!r} (at index {offset + where}): a quantile sketch takes "
                "finite values (NaN is counted and ignored); nothing of this call was added"
            )
        finite = finite + 0.0  # -0.0 becomes +0.0, so zeros have one canonical form
        positive = finite[finite > 0]
        negative = -finite[finite < 0]
        for part_values, pending in ((positive, pos), (negative, neg)):
            if part_values.size:
                keys = self._map.keys(part_values)
                kmin = int(keys.min())
                pending.append((kmin, np.bincount(keys - kmin), part_values.size))
        return finite, nans, finite.size - positive.size - negative.size

    # -- combining ------------------------------------------------------------------------------

    def _check_compatible(self, other: object) -> QuantileSketch:
        if not isinstance(other, QuantileSketch):
            raise SketchError(f"cannot merge a {type(other).__name__} into a QuantileSketch")
        if other._map.m != self._map.m or other._k != self._k:
            raise SketchError(
                "cannot merge sketches of different layouts: "
                f"relative_accuracy {self._relative_accuracy} (2**{self._map.m} buckets per "
                f"octave), top_k {self._k} vs relative_accuracy {other._relative_accuracy} "
                f"(2**{other._map.m}), top_k {other._k}"
            )
        return other

    def merge(self, other: QuantileSketch) -> QuantileSketch:
        """Add `other`'s values into this sketch, losslessly; returns self."""
        if (
            other.__class__ is not QuantileSketch
            or other._map is not self._map  # one shared mapping per layout (`_mapping`)
            or other._k != self._k
        ):
            self._check_compatible(other)  # a different layout, or not a sketch: it says which
        if self._scalar_count:
            self._flush()
        if other._scalar_count:
            other._flush()
        self._pos.merge(other._pos)
        self._neg.merge(other._neg)
        self._zeros += other._zeros
        self._nans += other._nans
        self._sum_units += other._sum_units
        self._top = _top_merge(self._top, other._top, self._k)
        self._bottom = _bottom_merge(self._bottom, other._bottom, self._k)
        return self

    def _subtract_counts(self, other: QuantileSketch) -> None:
        """Remove a pane's counts and sum (its extremes are the window's business)."""
        self._pos.subtract(other._pos)
        self._neg.subtract(other._neg)
        self._zeros -= other._zeros
        self._nans -= other._nans
        self._sum_units -= other._sum_units

    def copy(self) -> QuantileSketch:
        """An independent sketch with the same content."""
        self._flush()
        new = QuantileSketch.__new__(QuantileSketch)  # same layout: skip validation, share the map
        new._relative_accuracy, new._map, new._k = self._relative_accuracy, self._map, self._k
        new._pos = self._pos.copy()
        new._neg = self._neg.copy()
        new._zeros, new._nans, new._sum_units = self._zeros, self._nans, self._sum_units
        new._top, new._bottom = list(self._top), list(self._bottom)
        return new

    def __getstate__(self) -> tuple[None, dict[str, Any]]:
        """Pickle state as a plain slotted object's (as before the scalar buffer moved to a base
        class): every slot, plus the buffered scalars as `_scalars`, unflushed, so an unpickled
        sketch flushes where the original would and old pickles still load."""
        slots = QuantileSketch.__slots__
        state: dict[str, Any] = {name: getattr(self, name) for name in slots if hasattr(self, name)}
        buffered = np.frombuffer(self._take_scalars(), dtype=np.float64).tolist()
        for value in buffered:  # put them back: fewer than SCALAR_BUFFER, so no flush
            self.add(value)
        state["_scalars"] = buffered
        return None, state

    def __setstate__(self, state: tuple[None, dict[str, Any]]) -> None:
        slots = dict(state[1])
        scalars = slots.pop("_scalars", [])
        for name, value in slots.items():
            setattr(self, name, value)
        for value in scalars:
            self.add(value)

    # -- reading ----------------------------------------------------------------------------------

    @property
    def relative_accuracy(self) -> float:
        return self._relative_accuracy

    @property
    def error_bound(self) -> float:
        """The worst relative value error this layout can make: 2**-m <= relative_accuracy."""
        return self._map.error_bound

    @property
    def top_k(self) -> int:
        return self._k

    @property
    def count(self) -> int:
        """Values added, NaN excluded."""
        self._flush()
        return self._pos.total + self._neg.total + self._zeros

    @property
    def nan_count(self) -> int:
        self._flush()
        return self._nans

    @property
    def zero_count(self) -> int:
        self._flush()
        return self._zeros

    @property
    def min(self) -> float:
        """The exact smallest value (NaN when empty)."""
        self._flush()
        return self._bottom[0] if self._bottom else math.nan

    @property
    def max(self) -> float:
        """The exact largest value (NaN when empty)."""
        self._flush()
        return self._top[0] if self._top else math.nan

    @property
    def sum(self) -> float:
        """Sum of the values (see the module doc for how exact it is)."""
        self._flush()
        return _units_to_float(self._sum_units)

    @property
    def top(self) -> list[float]:
        """The `top_k` largest values, descending (all values when fewer)."""
        self._flush()
        return list(self._top)

    @property
    def bottom(self) -> list[float]:
        """The `top_k` smallest values, ascending (all values when fewer)."""
        self._flush()
        return list(self._bottom)

    def quantiles(self, qs: float | npt.ArrayLike) -> Floats:
        """Values at quantiles `qs` (each in [0, 1]); NaN for each when the sketch is empty."""
        self._flush()
        return _quantiles(self._map, self._pos, self._neg, self._zeros, self._top, self._bottom, qs)

    def buckets(self) -> tuple[Counts, Counts]:
        """(bucket ids, counts), ids ascending in value order: negatives as
        `NEGATIVE_BUCKET_BASE - key`, zero as `ZERO_BUCKET`, positives as their key. The sparse rows
        a warehouse stores and merges with `GROUP BY bucket, sum(count)`."""
        self._flush()
        ids: list[Counts] = []
        counts: list[Counts] = []
        neg_lo, neg_counts = self._neg.trimmed()
        if neg_counts.size:
            nonzero = np.flatnonzero(neg_counts)[::-1]
            ids.append(NEGATIVE_BUCKET_BASE - (neg_lo + nonzero))
            counts.append(neg_counts[nonzero])
        if self._zeros:
            ids.append(np.array([ZERO_BUCKET], dtype=np.int64))
            counts.append(np.array([self._zeros], dtype=np.int64))
        pos_lo, pos_counts = self._pos.trimmed()
        if pos_counts.size:
            nonzero = np.flatnonzero(pos_counts)
            ids.append(pos_lo + nonzero)
            counts.append(pos_counts[nonzero])
        if not ids:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return np.concatenate(ids).astype(np.int64), np.concatenate(counts).astype(np.int64)

    @classmethod
    def from_buckets(
        cls,
        bucket_ids: npt.ArrayLike,
        counts: npt.ArrayLike,
        top: Sequence[float],
        bottom: Sequence[float],
        *,
        total: float = 0.0,
        relative_accuracy: float = DEFAULT_RELATIVE_ACCURACY,
        top_k: int = DEFAULT_TOP_K,
    ) -> QuantileSketch:
        """The inverse of `buckets()` plus the extremes: a sketch from warehouse rows (a SQL
        `GROUP BY bucket, sum(count)` and the k largest / smallest of the panes' extremes).
        Repeated ids add up. SketchError when the rows cannot come from a sketch of this layout."""
        sketch = cls(relative_accuracy, top_k)
        ids = np.asarray(bucket_ids, dtype=np.int64).ravel()
        n_of = np.asarray(counts, dtype=np.int64).ravel()
        if ids.shape != n_of.shape or (n_of.size and int(n_of.min()) < 0):
            raise SketchError("bucket ids and counts must pair up, counts non-negative")
        sketch._zeros = int(n_of[ids == ZERO_BUCKET].sum())
        for store, keys, mask in (
            (sketch._pos, ids, ids > ZERO_BUCKET),
            (sketch._neg, NEGATIVE_BUCKET_BASE - ids, ids < ZERO_BUCKET),
        ):
            if mask.any():
                k, c = keys[mask], n_of[mask]
                lo = int(k.min())
                dense = np.zeros(int(k.max()) - lo + 1, dtype=np.int64)
                np.add.at(dense, k - lo, c)
                store.add(lo, dense, int(c.sum()))
        n = sketch._pos.total + sketch._neg.total + sketch._zeros
        hi_vals, lo_vals = [float(v) for v in top], [float(v) for v in bottom]
        if len(hi_vals) != min(top_k, n) or len(lo_vals) != min(top_k, n):
            raise SketchError(f"{len(hi_vals)} top / {len(lo_vals)} bottom values for {n} values")
        if not all(math.isfinite(v) for v in hi_vals + lo_vals) or (
            hi_vals != sorted(hi_vals, reverse=True) or lo_vals != sorted(lo_vals)
        ):
            raise SketchError("extreme values must be finite, top descending, bottom ascending")
        sketch._top, sketch._bottom = [v + 0.0 for v in hi_vals], [v + 0.0 for v in lo_vals]
        if total:
            sketch._sum_units = _units(np.array([float(total)]), abs(float(total)))
        return sketch

    def bucket_values(self, bucket_ids: npt.ArrayLike) -> Floats:
        """The representative value of each bucket id of `buckets()`."""
        ids = np.asarray(bucket_ids, dtype=np.int64)
        out = np.zeros(ids.shape, dtype=np.float64)
        positive = ids > ZERO_BUCKET
        negative = ids < ZERO_BUCKET
        out[positive] = self._map.values(ids[positive])
        out[negative] = -self._map.values(NEGATIVE_BUCKET_BASE - ids[negative])
        return out

    # -- bytes ------------------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """A compact, canonical blob: equal content gives equal bytes."""
        self._flush()
        head = _HEADER.pack(
            _MAGIC, self._relative_accuracy, self._map.m, self._k, len(self._top), len(self._bottom)
        )
        extremes = np.array(self._top + self._bottom, dtype="<f8").tobytes()
        units = self._sum_units
        shift = (units & -units).bit_length() - 1 if units else 0
        mantissa = units >> shift
        mantissa_bytes = mantissa.to_bytes((mantissa.bit_length() + 8) // 8, "little", signed=True)
        total = _SUM_HEADER.pack(shift, len(mantissa_bytes)) + mantissa_bytes
        fields: list[npt.ArrayLike] = [[self._nans, self._zeros]]
        for store in (self._pos, self._neg):
            key_lo, counts = store.trimmed()
            tokens = encode_counts(counts)
            fields.append([zigzag(key_lo), tokens.size])
            fields.append(tokens)
        varints = encode_varints(np.concatenate([np.asarray(f, dtype=np.uint64) for f in fields]))
        return head + extremes + total + varints

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> QuantileSketch:
        """Rebuild a sketch from `to_bytes`; SketchError on anything but a well-formed blob."""
        return _decode(cls, memoryview(data).cast("B"))

    def __repr__(self) -> str:
        return (
            f"QuantileSketch(relative_accuracy={self._relative_accuracy}, count={self.count}, "
            f"min={self.min}, max={self.max})"
        )


class SlidingQuantiles(SlidingWindow):
    """Quantiles over the last `panes` pushed sketches of this module's QuantileSketch (the window
    arithmetic is analyzers/sketch/sliding.py)."""

    __slots__ = ()
    sketch_type = QuantileSketch
