"""pandas' results bit for bit without pandas (HTA's numbers depend on its exact sorts, rounding
and std), and the analyses' interval arithmetic."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt

F64: TypeAlias = "npt.NDArray[np.float64]"
DESCRIBE_KEYS = ("count", "mean", "std", "min", "25%", "50%", "75%", "max")


def describe(values: npt.NDArray[Any]) -> dict[str, float]:
    """pandas `Series.describe()` of numeric values (NaNs ignored): count, mean, sample std, min,
    quartiles by linear interpolation, max (HTA's idle-interval, queue and bandwidth summaries)."""
    v = np.asarray(values, dtype=np.float64)
    v = v[~np.isnan(v)]
    n = len(v)
    if n == 0:
        return {"count": 0.0} | {k: math.nan for k in DESCRIBE_KEYS[1:]}
    mean = v.sum(dtype=np.float64) / n
    std = math.sqrt(((mean - v) ** 2).sum(dtype=np.float64) / (n - 1)) if n > 1 else math.nan
    quartiles = np.percentile(v, [25.0, 50.0, 75.0]).tolist()
    row = (n, mean, std, v.min(), *quartiles, v.max())
    return dict(zip(DESCRIBE_KEYS, map(float, row), strict=True))


def join_rows(
    left: npt.NDArray[np.int64], right: npt.NDArray[np.int64], *, left_join: bool = False
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Positions (i, j) with `left[i] == right[j]`, ordered by i, then j. With `left_join`, a
    left row without a match gives one pair (i, -1)."""
    order = np.argsort(right, kind="stable")  # by key, then position: each key's rows in order
    keys = right[order]
    lo = np.searchsorted(keys, left, side="left")
    counts = np.searchsorted(keys, left, side="right") - lo
    per_row = np.maximum(counts, 1) if left_join else counts
    i = np.repeat(np.arange(len(left)), per_row)
    within = np.arange(len(i)) - np.repeat(np.cumsum(per_row) - per_row, per_row)
    at = np.repeat(lo, per_row) + within
    j = order[np.minimum(at, len(order) - 1)] if len(order) else np.zeros(len(i), dtype=np.intp)
    if left_join:
        j = np.where(np.repeat(counts == 0, per_row), -1, j)
    return i, j


def time_lexsort(keys: Sequence[npt.NDArray[Any]]) -> npt.NDArray[np.intp]:
    """`np.lexsort(keys)` (the last key primary) for a primary key few rows share (event times):
    a stable sort by it, then only the rows that tie (NaNs tie) by the other keys."""
    primary = keys[-1]
    order = np.argsort(primary, kind="stable")
    p = primary[order]
    same = (p[1:] == p[:-1]) | ((p[1:] != p[1:]) & (p[:-1] != p[:-1]))  # NaN: x != x
    tied = np.zeros(len(p), dtype=bool)
    tied[1:] = same
    tied[:-1] |= same
    at = np.flatnonzero(tied)
    sub = order[at]
    group = np.cumsum(np.concatenate([[True], ~same]))[at]
    order[at] = sub[np.lexsort((*(k[sub] for k in keys[:-1]), group))]
    return order


def last_not_below(values: F64, before: npt.NDArray[np.int64], bound: F64) -> npt.NDArray[np.int64]:
    """Per query i, the last j < before[i] where `values[j] < bound[i]` is false (NaN: not below),
    else -1: skipping back over blocks of 2^k values all below the bound, k descending, by a table
    of each block size's maxima (log2(len(values)) vector steps)."""
    pos = before
    most = [values]  # most[k][j]: the largest of values[j : j + 2^k] (NaN if one is NaN)
    while 2 ** len(most) <= len(values):
        half = 2 ** (len(most) - 1)
        most.append(np.maximum(most[-1][:-half], most[-1][half:]))
    for k in range(len(most) - 1, -1, -1):
        start = pos - 2**k
        skip = start >= 0
        skip[skip] = most[k][start[skip]] < bound[skip]
        pos = np.where(skip, start, pos)
    return pos - 1


def group_std(values: F64) -> float:
    """Sample std as pandas' groupby computes it (Welford); 0.0 for one value, as HTA fills it."""
    mean = m2 = 0.0
    for n, val in enumerate(values.tolist(), 1):
        old = mean
        mean += (val - old) / n
        m2 += (val - mean) * (val - old)
    return math.sqrt(m2 / (len(values) - 1)) if len(values) > 1 else 0.0


def hta_round(value: float, decimals: int) -> float:
    """`round(pd.Series, n)` as HTA calls it: numpy rounding, NaN stays NaN."""
    return float(np.round(np.float64(value), decimals))


def unstable_argsort(key: npt.NDArray[Any], descending: bool = False) -> npt.NDArray[np.intp]:
    """pandas `nargsort(kind="quicksort")`: the exact permutation `sort_values` would apply
    (HTA's tie-breaking depends on it)."""
    if not descending:
        return np.argsort(key, kind="quicksort")
    rev = np.arange(len(key))[::-1]
    return rev[np.asarray(key)[::-1].argsort(kind="quicksort")][::-1]


def union_intervals(start: F64, end: F64) -> tuple[F64, F64]:
    """Merged [start, end) intervals, sorted; intervals that touch or overlap merge (HTA's
    `merge_kernel_intervals`)."""
    if len(start) == 0:
        return np.zeros(0), np.zeros(0)
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    new_group = np.concatenate([[True], s[1:] > np.maximum.accumulate(e)[:-1]])
    return s[new_group], np.maximum.reduceat(e, np.flatnonzero(new_group))


def intersection_length(a_start: F64, a_end: F64, b_start: F64, b_end: F64) -> float:
    """|A ∩ B| for two *merged* (disjoint, sorted) interval sets."""
    if not len(a_start) or not len(b_start):
        return 0.0
    times = np.concatenate([a_start, a_end, b_start, b_end])
    delta = np.repeat([1.0, -1.0, 2.0, -2.0], [len(a_start), len(a_end), len(b_start), len(b_end)])
    order = np.argsort(times, kind="stable")
    running = np.cumsum(delta[order])
    return float(np.diff(times[order])[running[:-1] == 3].sum())


def window_intersections(
    windows: Sequence[tuple[float, float]], b_start: F64, b_end: F64
) -> list[float]:
    """`intersection_length` of each window (w0, w1) with B, the same floats without a sort per
    window: for B as `union_intervals` leaves it (sorted, disjoint, no NaN) the sweep's segments
    are `min(end, w1) - max(start, w0)` where `start < w1` and `end >= w0`; else the sweep."""
    merged = (  # a NaN fails a comparison
        len(b_start) > 0
        and bool((b_end >= b_start).all())
        and bool((b_start[1:] > b_end[:-1]).all())
    )
    out = []
    for w0, w1 in windows:
        if merged and w0 < w1:
            inside = (b_start < w1) & (b_end >= w0)
            seg = np.minimum(b_end[inside], w1) - np.maximum(b_start[inside], w0)
            out.append(float(seg.sum()))
        else:
            out.append(intersection_length(np.array([w0]), np.array([w1]), b_start, b_end))
    return out
