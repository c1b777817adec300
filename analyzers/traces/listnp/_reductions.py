"""Reductions: sum with numpy's pairwise summation (bit for bit), mean, max/min, argmax/argmin,
nansum, cumsum and bincount."""

from __future__ import annotations

import math
import operator
from functools import reduce as _reduce
from itertools import accumulate as _accumulate

from analyzers.traces.listnp._array import _wrap, ndarray
from analyzers.traces.listnp._casting import _cast, _check_int_range
from analyzers.traces.listnp._construction import _arr1
from analyzers.traces.listnp._dtypes import (
    _INT64_MAX,
    _INT64_MIN,
    _NIE,
    F64,
    I64,
    U64,
    _dtype_of,
    dtype,
)
from analyzers.traces.listnp._elementwise import _has_nan, _mixed_zero

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_add = operator.add


_BUFSIZE = 8192  # numpy's default ufunc buffer: casted reductions are summed in such chunks


def _pairwise(d: list[float], lo: int, n: int) -> float:
    """numpy's `pairwise_sum` (umath/loops_utils.h.src) of d[lo:lo+n], bit for bit."""
    if n < 8:
        return _reduce(_add, d[lo : lo + n], -0.0)
    if n <= 128:
        m = lo + n - n % 8
        r0 = _reduce(_add, d[lo + 8 : m : 8], d[lo])
        r1 = _reduce(_add, d[lo + 9 : m : 8], d[lo + 1])
        r2 = _reduce(_add, d[lo + 10 : m : 8], d[lo + 2])
        r3 = _reduce(_add, d[lo + 11 : m : 8], d[lo + 3])
        r4 = _reduce(_add, d[lo + 12 : m : 8], d[lo + 4])
        r5 = _reduce(_add, d[lo + 13 : m : 8], d[lo + 5])
        r6 = _reduce(_add, d[lo + 14 : m : 8], d[lo + 6])
        r7 = _reduce(_add, d[lo + 15 : m : 8], d[lo + 7])
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        return _reduce(_add, d[m : lo + n], res)
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise(d, lo, n2) + _pairwise(d, lo + n2, n - n2)


def _fsum(d: list[float], casted: bool = False) -> float:
    """numpy's add.reduce of float64 elements: the identity 0.0 plus the pairwise sum; a
    reduction that casts (ints summed as float64) is buffered in chunks of 8192."""
    if not casted or len(d) <= _BUFSIZE:
        return 0.0 + _pairwise(d, 0, len(d))
    acc = 0.0
    for lo in range(0, len(d), _BUFSIZE):
        acc += _pairwise(d, lo, min(_BUFSIZE, len(d) - lo))
    return acc


def _sum(a: ndarray, dtype: object = None) -> Any:
    t = a._t
    k = t.kind
    d = a._d
    if dtype is not None:
        rt = _dtype_of(dtype)
        if rt is F64:
            if k == "f":
                return _fsum(d)
            if k in "iub":
                return _fsum(list(map(float, d)), casted=True)
            raise _NIE(f"listnp: sum of {t} as float64")
        if rt.kind == "i" and k in "iub":
            total = sum(d)
            if not rt._lo <= total <= rt._hi:
                raise _NIE("listnp: integer sum overflow")
            return int(total)
        raise _NIE(f"listnp: sum(dtype={rt})")
    if k == "f":
        return _fsum(d)
    if k == "i" or k == "b":
        total = sum(d)
        if not _INT64_MIN <= total <= _INT64_MAX:
            raise _NIE("listnp: integer sum overflow (numpy would wrap)")
        return int(total)
    if k == "u":
        total = sum(d)
        if total > U64._hi:
            raise _NIE("listnp: integer sum overflow (numpy would wrap)")
        return total
    raise _NIE(f"listnp: sum of {t}")


def _mean(a: ndarray, dtype: object = None) -> float:
    if dtype is not None and _dtype_of(dtype) is not F64:
        raise _NIE("listnp: mean(dtype)")
    k = a._t.kind
    d = a._d
    if not d:
        return math.nan  # numpy: nan, with a RuntimeWarning
    if k == "f":
        return _fsum(d) / len(d)
    if k in "iub":
        return _fsum(list(map(float, d)), casted=True) / len(d)
    raise _NIE(f"listnp: mean of {a._t}")


def _extreme(d: list[Any], t: dtype, is_max: bool, name: str) -> Any:
    if not d:
        raise ValueError(f"zero-size array to reduction operation {name} which has no identity")
    k = t.kind
    if k == "f":
        if _has_nan(d):
            return math.nan
        m = max(d) if is_max else min(d)
        if m == 0.0 and _mixed_zero(d):
            raise _NIE("listnp: max/min of +0.0 and -0.0")
        return m
    if k in "iub":
        return max(d) if is_max else min(d)
    raise _NIE(f"listnp: {name} of {t}")


def _argextreme(a: ndarray, is_max: bool) -> int:
    d = a._d
    if not d:
        raise ValueError(f"attempt to get {'argmax' if is_max else 'argmin'} of an empty sequence")
    k = a._t.kind
    if k == "f":
        for i, x in enumerate(d):
            if x != x:
                return i
    elif k not in "iub":
        raise _NIE(f"listnp: argmax/argmin of {a._t}")
    m = max(d) if is_max else min(d)
    return d.index(m)


def nansum(a: object, axis: object = None, dtype: object = None) -> Any:
    if axis not in (None, 0, -1):
        raise _NIE("listnp: nansum(axis)")
    arr = _arr1(a)
    if arr._t.kind == "f":
        d = arr._d
        if _has_nan(d):
            d = [0.0 if x != x else x for x in d]
        return _sum(_wrap(d, F64), dtype)
    return _sum(arr, dtype)


def _np_sum(a: object, axis: object = None, dtype: object = None) -> Any:
    if axis not in (None, 0, -1):
        raise _NIE("listnp: sum(axis)")
    return _sum(_arr1(a), dtype)


def mean(a: object, axis: object = None, dtype: object = None) -> Any:
    if axis not in (None, 0, -1):
        raise _NIE("listnp: mean(axis)")
    return _mean(_arr1(a), dtype)


def amax(a: object, axis: object = None) -> Any:
    return _arr1(a).max(axis)


def amin(a: object, axis: object = None) -> Any:
    return _arr1(a).min(axis)


def _np_any(a: object, axis: object = None) -> bool:
    return _arr1(a).any(axis)


def _np_all(a: object, axis: object = None) -> bool:
    return _arr1(a).all(axis)


def cumsum(a: object, axis: object = None, dtype: object = None) -> ndarray:
    if axis not in (None, 0, -1) or dtype is not None:
        raise _NIE("listnp: cumsum() arguments")
    arr = _arr1(a)
    t = arr._t
    k = t.kind
    d = arr._d
    if k == "f":
        return _wrap(list(_accumulate(d)), t)
    if k == "i" or k == "b":
        out = list(_accumulate(d if k == "i" else map(int, d)))
        return _wrap(_check_int_range(out, I64), I64)
    if k == "u":
        out = list(_accumulate(d))
        return _wrap(_check_int_range(out, U64), U64)
    raise _NIE(f"listnp: cumsum of {t}")


def bincount(x: object, weights: object = None, minlength: int = 0) -> ndarray:
    arr = _arr1(x)
    if arr._t.kind not in "iub":
        raise TypeError(
            f"Cannot cast array data from dtype('{arr._t}') to dtype('int64') according to the "
            "rule 'safe'"
        )
    d = arr._d if arr._t.kind != "b" else list(map(int, arr._d))
    if minlength < 0:
        raise ValueError("'minlength' must not be negative")
    if d and min(d) < 0:
        raise ValueError("'list' argument must have no negative elements")
    size = max(max(d) + 1 if d else 0, minlength)
    if weights is None or not d:  # numpy: an empty x gives int zeros even with weights
        counts = [0] * size
        for i in d:
            counts[i] += 1
        return _wrap(counts, I64)
    w = _arr1(weights)
    if len(w._d) != len(d):
        raise ValueError("The weights and list don't have the same length.")
    if w._t.kind not in "fiub":
        raise _NIE(f"listnp: bincount weights of {w._t}")
    wd = _cast(w._d, w._t, F64)
    sums = [0.0] * size
    for i, v in zip(d, wd, strict=True):
        sums[i] += v
    return _wrap(sums, F64)
