"""Sorting and searching: argsort (and the `tie_order` hook for the order numpy's unstable sort
gives equal keys), sort, lexsort and searchsorted."""

from __future__ import annotations

import math
import operator
from itertools import repeat as _repeat

from analyzers.traces import listnp as _pkg  # the package (loading, when this runs)
from analyzers.traces.listnp._array import _wrap, ndarray
from analyzers.traces.listnp._casting import _plain, _promote, _weak_kind, _weak_promote
from analyzers.traces.listnp._construction import _arr1
from analyzers.traces.listnp._dtypes import _NIE, I64, dtype
from analyzers.traces.listnp._elementwise import _as, _has_nan, _mixed_zero, _scalar_as

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

_eq = operator.eq
_le = operator.le


class TieOrderUnknown(NotImplementedError):
    """numpy's unstable sort (the default `kind`) orders these equal keys in an unspecified,
    machine-dependent way that listnp does not know (see `tie_order`)."""


def tie_order(stable_order: list[int], tie_groups: list[tuple[int, int]]) -> list[int]:
    """The permutation numpy's default (unstable) argsort returns, given the stable one.

    `stable_order` is the stable argsort of the keys (equal keys in index order, NaN last);
    each `(start, end)` of `tie_groups` is a maximal span `stable_order[start:end]` of equal keys
    (at least two). Return `stable_order` with each span permuted as numpy would. A plain module
    attribute: the lead replaces it with a model of numpy's sort; this default does not know
    numpy's order and raises `TieOrderUnknown` (a NotImplementedError: the caller falls back to
    numpy). Called only when there are ties (without ties every sort gives the same order).
    """
    raise TieOrderUnknown(
        f"listnp: numpy's unstable argsort order of {len(tie_groups)} group(s) of equal keys"
    )


def _stable_order(d: list[Any], t: dtype) -> list[int]:
    """The stable argsort (numpy's kind="stable"): NaN last, -0.0 == 0.0, ties by index."""
    k = t.kind
    n = len(d)
    if k == "f":
        if _has_nan(d):
            keep = [i for i in range(n) if d[i] == d[i]]
            return sorted(keep, key=d.__getitem__) + [i for i in range(n) if d[i] != d[i]]
        return sorted(range(n), key=d.__getitem__)
    if k in "iubU":
        return sorted(range(n), key=d.__getitem__)
    raise _NIE(f"listnp: sorting {t}")


def _tie_groups(d: list[Any], order: list[int]) -> list[tuple[int, int]]:
    """Maximal spans of equal keys (NaNs equal each other) in the sorted order."""
    v = [d[i] for i in order]
    groups: list[tuple[int, int]] = []
    start = 0
    n = len(v)
    for i in range(1, n + 1):
        if i < n:
            a, b = v[i - 1], v[i]
            if a == b or (a != a and b != b):
                continue
        if i - start > 1:
            groups.append((start, i))
        start = i
    return groups


def _has_ties(d: list[Any], order: list[int]) -> bool:
    v = [d[i] for i in order]
    return len(v) > 1 and (any(map(_eq, v[1:], v[:-1])) or (v[-1] != v[-1] and v[-2] != v[-2]))


def argsort(a: object, axis: object = -1, kind: str | None = None, order: object = None) -> ndarray:
    if axis not in (-1, 0) or order is not None:
        raise _NIE("listnp: argsort() arguments")
    arr = _arr1(a)
    d = arr._d
    stable = _stable_order(d, arr._t)
    if kind in ("stable", "mergesort"):
        return _wrap(stable, I64)
    if kind not in (None, "quicksort"):
        raise _NIE(f"listnp: argsort(kind={kind!r})")
    if not _has_ties(d, stable):
        return _wrap(stable, I64)
    groups = _tie_groups(d, stable)
    # looked up on the package at each call: the engine replaces `listnp.tie_order` at run time
    result = list(_pkg.tie_order(list(stable), groups))
    _check_tie_order(stable, groups, result)
    return _wrap(result, I64)


def _check_tie_order(stable: list[int], groups: list[tuple[int, int]], result: list[int]) -> None:
    """The hook may only permute within each group."""
    if len(result) != len(stable):
        raise _NIE("listnp: tie_order returned a permutation of another length")
    prev = 0
    for s, e_ in groups:
        if result[prev:s] != stable[prev:s] or sorted(result[s:e_]) != sorted(stable[s:e_]):
            raise _NIE("listnp: tie_order permuted outside a group of ties")
        prev = e_
    if result[prev:] != stable[prev:]:
        raise _NIE("listnp: tie_order permuted outside a group of ties")


def sort(a: object, axis: object = -1, kind: str | None = None, order: object = None) -> ndarray:
    if axis not in (-1, 0) or order is not None:
        raise _NIE("listnp: sort() arguments")
    arr = _arr1(a)
    d = arr._d
    t = arr._t
    k = t.kind
    if kind not in (None, "quicksort", "stable", "mergesort"):
        raise _NIE(f"listnp: sort(kind={kind!r})")
    if k == "f":
        if _has_nan(d):
            out = sorted(x for x in d if x == x) + [math.nan] * _pybool_count_nan(d)
        else:
            out = sorted(d)
        if kind not in ("stable", "mergesort") and 0.0 in out and _mixed_zero(out):
            raise TieOrderUnknown("listnp: numpy's unstable sort order of 0.0 and -0.0")
        return _wrap(out, t)
    if k in "iubU":
        return _wrap(sorted(d), t)
    raise _NIE(f"listnp: sort of {t}")


def _pybool_count_nan(d: list[float]) -> int:
    return len(d) - [x == x for x in d].count(True)


def lexsort(keys: Sequence[object], axis: object = -1) -> ndarray:
    if axis not in (-1, 0):
        raise _NIE("listnp: lexsort(axis)")
    if isinstance(keys, ndarray):
        return _wrap(_stable_order(keys._d, keys._t), I64)
    arrs = [_arr1(k) for k in keys]
    if not arrs:
        raise TypeError("need sequence of keys with len > 0 in lexsort")
    n = len(arrs[0]._d)
    if any(len(k._d) != n for k in arrs):
        raise ValueError("all keys need to be the same shape")
    order = _stable_order(arrs[0]._d, arrs[0]._t)
    for k in arrs[1:]:
        kd = k._d
        sub = _stable_order([kd[i] for i in order], k._t)
        order = [order[j] for j in sub]
    return _wrap(order, I64)


def _is_sorted(d: list[Any], k: str) -> bool:
    if k == "f" and _has_nan(d):
        p = [x == x for x in d].index(False)
        if any(x == x for x in d[p:]):
            return False
        d = d[:p]
    return all(map(_le, d[:-1], d[1:]))


def searchsorted(a: object, v: object, side: str = "left", sorter: object = None) -> Any:
    """numpy's binary search; on an array not sorted in numpy's order (NaN last) numpy's result
    depends on its search path, so that raises NotImplementedError."""
    if sorter is not None:
        raise _NIE("listnp: searchsorted(sorter=)")
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right' (got {side!r})")
    arr = _arr1(a)
    hd = arr._d
    ht = arr._t
    scalar = type(v) is not ndarray and type(v) is not list and type(v) is not tuple
    if scalar:
        kind = _weak_kind(v)
        if not kind or kind == "U":
            raise _NIE(f"listnp: searchsorted of {type(v).__name__}")
        value = _plain(v, kind)
        t = _weak_promote(ht, kind, value) if ht.kind in "iubf" else _NIE_dtype(ht)
        needles = [_scalar_as(value, t)]
        vt = t
    else:
        varr = _arr1(v)
        t = _promote(ht, varr._t)
        needles = _as(varr._d, varr._t, t)
        vt = varr._t
    if t.kind not in "iubf":
        raise _NIE(f"listnp: searchsorted of {t}")
    hd = _as(hd, ht, t)
    if not _is_sorted(hd, t.kind):
        raise _NIE("listnp: searchsorted in an array that is not sorted")
    del vt
    from bisect import bisect_left as _bisect_left  # imported on first use (~0.3 ms)
    from bisect import bisect_right as _bisect_right

    if t.kind == "f" and (_has_nan(hd) or _has_nan(needles)):
        p = len(hd) - _pybool_count_nan(hd)
        body = hd[:p]
        bis = _bisect_left if side == "left" else _bisect_right
        nan_pos = p if side == "left" else len(hd)
        out = [bis(body, x) if x == x else nan_pos for x in needles]
    else:
        bisect = _bisect_left if side == "left" else _bisect_right
        out = list(map(bisect, _repeat(hd, len(needles)), needles))
    return out[0] if scalar else _wrap(out, I64)


def _NIE_dtype(t: dtype) -> dtype:
    raise _NIE(f"listnp: {t}")
