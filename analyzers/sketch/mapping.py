"""Value to bucket key, and bucket key back to a value, for the quantile sketch (analyzers/sketch/core.py).

A log-linear mapping read straight off the IEEE-754 bits, as HdrHistogram and the DDSketch family
do, with no logarithm: a positive float64 `v` with bits `b` goes to key `(b - 1) >> (52 - m)`, the
11 exponent bits and the top `m` mantissa bits of the float just below `v`. So the bucket of key
`k` is the half-open interval `(L, U]` with `L` the float whose bits are `k << (52 - m)` and `U`
the float of `(k + 1) << (52 - m)`: each power of two is cut into `2**m` buckets of equal width,
`U / L <= 1 + 2**-m`.

Why upper-closed buckets: every integer `n <= 2**(m + 1)` is then the upper edge `U` of its own
bucket, so answering `U` returns such integers exactly (GPU utilization, temperatures, clocks are
small integers; `../shared/sketches.md`, "Integer awareness"). Answering `U` costs at most
`(U - L) / L <= 2**-m` relative error; every other bucket answers the value that minimizes the worst
relative error over `(L, U]`, the harmonic mean `2LU / (L + U)`, error `<= 1 / (2**(m + 1) + 1)`.
With `m = ceil(log2(1 / alpha))` both stay within the configured accuracy `alpha`
(`alpha = 0.01` gives `m = 7`: 128 buckets per power of two, bound 0.78 %).

Subnormal values (at or below 2**-1022, the smallest normal) are scaled by 2**64 before indexing and
their keys shifted down by `64 << m`, so they keep the same relative bound; every key below
`SUBNORMAL_KEY_END` belongs to them. Zero, negatives, NaN and infinities never reach this module:
the sketch counts zeros exactly, mirrors negatives onto their magnitudes, counts NaN and rejects
infinities before asking for keys.

This module must never hold state or allocate per value beyond its numpy temporaries.
"""

from __future__ import annotations

import math
import struct

import numpy as np
import numpy.typing as npt

__all__ = ["LogLinearMapping", "bits_to_float", "mantissa_bits_for"]

_MIN_NORMAL_BITS = 1 << 52  # bits of 2**-1022
_SUBNORMAL_SCALE = 2.0**64
_SUBNORMAL_UNSCALE = 2.0**-64

_BITS = struct.Struct("<q")
_DOUBLE = struct.Struct("<d")

Keys = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]


def bits_to_float(bits: int) -> float:
    """The float64 whose IEEE-754 bits are `bits` (a signed 64-bit integer)."""
    value: float = _DOUBLE.unpack(_BITS.pack(bits))[0]
    return value


def mantissa_bits_for(relative_accuracy: float) -> int:
    """The fewest mantissa bits `m` whose worst-case relative error `2**-m` is within the accuracy."""
    return max(1, math.ceil(-math.log2(relative_accuracy) - 1e-12))


class LogLinearMapping:
    """Keys and representative values for `2**m` buckets per power of two (see the module doc)."""

    __slots__ = ("exact_integer_limit", "m", "shift", "subnormal_key_end", "subnormal_key_offset")

    def __init__(self, m: int) -> None:
        if not 1 <= m <= 20:
            raise ValueError(f"mantissa bits must be in [1, 20], got {m}")
        self.m = m
        self.shift = 52 - m
        self.subnormal_key_offset = 64 << m
        # Keys of values <= 2**-1022 come from the scaled path and lie strictly below this.
        self.subnormal_key_end = _MIN_NORMAL_BITS >> self.shift
        self.exact_integer_limit = float(1 << (m + 1))

    @property
    def error_bound(self) -> float:
        """The largest relative error of any representative value: `2**-m`."""
        return 2.0**-self.m

    def keys(self, positive: Floats) -> Keys:
        """Keys of finite values > 0 (any magnitude, subnormals included)."""
        bits = positive.view(np.int64)
        keys: Keys = (bits - 1) >> self.shift
        small = bits <= _MIN_NORMAL_BITS
        if small.any():
            scaled = positive[small] * _SUBNORMAL_SCALE
            keys[small] = ((scaled.view(np.int64) - 1) >> self.shift) - self.subnormal_key_offset
        return keys

    def values(self, keys: Keys) -> Floats:
        """The representative value of each key: the upper edge for small-integer edges, else the
        harmonic mean of the edges (see the module doc for why and for the bounds)."""
        keys = np.asarray(keys, dtype=np.int64)
        small = keys < self.subnormal_key_end
        normal_keys = np.where(small, keys + self.subnormal_key_offset, keys)
        lower = (normal_keys << self.shift).view(np.float64)
        upper = ((normal_keys + 1) << self.shift).view(np.float64)
        sub = (normal_keys & ((1 << self.m) - 1)) + (1 << self.m)
        # 2LU/(L+U) with U/L = (sub+1)/sub, written so that it cannot overflow near DBL_MAX.
        harmonic = lower * ((2.0 * (sub + 1)) / (2.0 * sub + 1.0))
        integer_edge = (upper <= self.exact_integer_limit) & (upper == np.floor(upper))
        reps: Floats = np.where(integer_edge, upper, harmonic)
        if small.any():
            reps[small] *= _SUBNORMAL_UNSCALE
        return reps

    def value(self, key: int) -> float:
        """`values` for one key in plain Python floats (the same IEEE operations, so the same
        result): a query asks for a few keys, where numpy's per-call cost dominates."""
        scale = 1.0
        if key < self.subnormal_key_end:
            key += self.subnormal_key_offset
            scale = _SUBNORMAL_UNSCALE
        upper = bits_to_float((key + 1) << self.shift)
        if upper <= self.exact_integer_limit and upper == math.floor(upper):
            return upper * scale
        lower = bits_to_float(key << self.shift)
        sub = (key & ((1 << self.m) - 1)) + (1 << self.m)
        return lower * ((2.0 * (sub + 1)) / (2.0 * sub + 1.0)) * scale

    def bounds(self, keys: Keys) -> tuple[Floats, Floats]:
        """(L, U): the open lower and closed upper edge of each key's bucket, for tests and docs."""
        keys = np.asarray(keys, dtype=np.int64)
        small = keys < self.subnormal_key_end
        normal_keys = np.where(small, keys + self.subnormal_key_offset, keys)
        lower = (normal_keys << self.shift).view(np.float64).copy()
        upper = ((normal_keys + 1) << self.shift).view(np.float64).copy()
        lower[small] *= _SUBNORMAL_UNSCALE
        upper[small] *= _SUBNORMAL_UNSCALE
        return lower, upper
