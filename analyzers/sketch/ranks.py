"""Rank arithmetic of a QuantileSketch (analyzers/sketch/core.py): the quantiles of buckets plus
exact extremes, as `np.quantile(method="inverted_cdf")` would answer them, and exact sums back
to floats.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from analyzers.sketch.chunks import _UNIT_BITS, Floats
from analyzers.sketch.counts import CountStore
from analyzers.sketch.mapping import LogLinearMapping
from fleetscope.errors import SketchError


def _units_to_float(units: int) -> float:
    try:
        return units / (1 << _UNIT_BITS)
    except OverflowError:
        return math.inf if units > 0 else -math.inf


def _quantiles(
    mapping: LogLinearMapping,
    pos: CountStore,
    neg: CountStore,
    zeros: int,
    top: Sequence[float],
    bottom: Sequence[float],
    qs: float | npt.ArrayLike,
) -> Floats:
    """The rank arithmetic of `np.quantile(method="inverted_cdf")` over buckets and extremes.

    A handful of quantiles per call is the common case, so ranks are sorted into exact extremes,
    zeros and buckets in Python, with one cumulative sum and one search per store touched."""
    try:
        q = np.asarray(qs, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise SketchError(f"quantiles must be numbers in [0, 1], got {qs!r}") from exc
    # A handful of quantiles is the common case: plain float arithmetic beats numpy's per-call
    # cost here, and `n * x - 1.0` then `ceil` are the same IEEE operations numpy would do.
    fractions: list[float] = q.ravel().tolist()
    for x in fractions:
        if not 0.0 <= x <= 1.0:  # NaN fails too
            raise SketchError(f"quantiles must be in [0, 1], got {qs!r}")
    n = pos.total + neg.total + zeros
    if n == 0:
        return np.full(q.shape, np.nan)
    # numpy: virtual index n*q - 1, rounded up to the next order statistic, clipped to [0, n-1].
    ceil, last = math.ceil, n - 1
    ranks = [min(max(ceil(n * x - 1.0), 0), last) for x in fractions]
    out = [0.0] * len(ranks)
    n_bottom, first_top = len(bottom), n - len(top)
    n_neg, first_pos = neg.total, neg.total + zeros
    low, high = bottom[-1], top[-1]
    in_pos: list[int] = []
    in_neg: list[int] = []
    for i, rank in enumerate(ranks):
        if rank < n_bottom:  # the kept extremes are exact
            out[i] = bottom[rank]
        elif rank >= first_top:
            out[i] = top[n - 1 - rank]
        elif rank >= first_pos:
            in_pos.append(i)
        elif rank < n_neg:
            in_neg.append(i)  # zeros stay 0.0
    for store, picked, sign in ((pos, in_pos, 1.0), (neg, in_neg, -1.0)):
        if not picked:
            continue
        key_lo, counts = store.used()
        if sign > 0:
            wanted = [ranks[i] - first_pos for i in picked]
            found = np.searchsorted(np.cumsum(counts), wanted, side="right").tolist()
            keys = [key_lo + j for j in found]
        else:  # negatives: the largest magnitude comes first
            wanted = [ranks[i] for i in picked]
            found = np.searchsorted(np.cumsum(counts[::-1]), wanted, side="right").tolist()
            keys = [key_lo + counts.size - 1 - j for j in found]
        for i, key in zip(picked, keys, strict=True):
            # Buckets answer within the bound; the kept extremes bound everything in between.
            out[i] = min(max(sign * mapping.value(key), low), high)
    return np.array(out, dtype=np.float64).reshape(q.shape)
