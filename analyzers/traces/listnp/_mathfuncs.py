"""Elementwise math functions: isnan/isfinite/isinf, floor/ceil/trunc, round (numpy's
scale-rint-unscale), sqrt, absolute and clip."""

from __future__ import annotations

import math

from analyzers.traces.listnp._array import _wrap, ndarray
from analyzers.traces.listnp._casting import _cast, _weak_kind
from analyzers.traces.listnp._construction import _arr1
from analyzers.traces.listnp._dtypes import _NIE, BOOL, F64
from analyzers.traces.listnp._elementwise import _minmax
from analyzers.traces.listnp._functions import _edge

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_ceil = math.ceil
_copysign = math.copysign
_floor = math.floor
_trunc = math.trunc


def _float_like(x: ndarray, name: str) -> None:
    if x._t.kind not in "fiub":
        raise _NIE(f"listnp: {name} of {x._t}")


def isnan(x: object) -> Any:
    if type(x) is ndarray:
        arr: ndarray = x
        k = arr._t.kind
        if k == "f":
            return _wrap([v != v for v in arr._d], BOOL)
        if k in "iub":
            return _wrap([False] * len(arr._d), BOOL)
        if k == "O" or k == "U":
            raise TypeError("ufunc 'isnan' not supported for the input types")
        raise _NIE(f"listnp: isnan of {arr._t}")
    kind = _weak_kind(x)
    if kind in ("f", "i", "b"):
        return x != x
    if type(x) in (list, tuple):
        return isnan(_arr1(x))
    raise _NIE(f"listnp: isnan of {type(x).__name__}")


def isfinite(x: object) -> Any:
    if type(x) is ndarray:
        arr: ndarray = x
        k = arr._t.kind
        if k == "f":
            return _wrap(list(map(math.isfinite, arr._d)), BOOL)
        if k in "iub":
            return _wrap([True] * len(arr._d), BOOL)
        raise _NIE(f"listnp: isfinite of {arr._t}")
    if _weak_kind(x) in ("f", "i", "b"):
        return math.isfinite(x)  # type: ignore[arg-type]
    raise _NIE(f"listnp: isfinite of {type(x).__name__}")


def isinf(x: object) -> Any:
    if type(x) is ndarray:
        arr: ndarray = x
        k = arr._t.kind
        if k == "f":
            return _wrap(list(map(math.isinf, arr._d)), BOOL)
        if k in "iub":
            return _wrap([False] * len(arr._d), BOOL)
        raise _NIE(f"listnp: isinf of {arr._t}")
    if _weak_kind(x) in ("f", "i", "b"):
        return math.isinf(x)  # type: ignore[arg-type]
    raise _NIE(f"listnp: isinf of {type(x).__name__}")


def _rounder(fn: Callable[[float], int]) -> Callable[[object], Any]:
    """floor/ceil/trunc: float in, float out (signed zeros kept); ints and bools unchanged."""

    def one(x: float) -> float:
        if x != x or x in (math.inf, -math.inf):
            return x
        return _copysign(float(fn(x)), x)

    def apply(x: object) -> Any:
        if type(x) is ndarray:
            arr: ndarray = x
            k = arr._t.kind
            if k == "f":
                d = arr._d
                try:
                    return _wrap([_copysign(float(fn(v)), v) for v in d], F64)
                except (ValueError, OverflowError):
                    return _wrap(list(map(one, d)), F64)
            if k in "iub":
                return arr.copy()
            raise _NIE(f"listnp: {fn.__name__} of {arr._t}")
        kind = _weak_kind(x)
        if kind == "f":
            return one(float(x))  # type: ignore[arg-type]
        if kind in ("i", "b"):
            return x
        if type(x) in (list, tuple):
            return apply(_arr1(x))
        raise _NIE(f"listnp: {fn.__name__} of {type(x).__name__}")

    apply.__name__ = fn.__name__
    return apply


floor = _rounder(_floor)
ceil = _rounder(_ceil)
trunc = _rounder(_trunc)


def _rint(x: float) -> float:
    """numpy's rint: round half to even, keeping the sign of zero, inf and nan as they are."""
    if x != x or x in (math.inf, -math.inf):
        return x
    return _copysign(float(round(x)), x)


def _power_of_ten(n: int) -> float:
    """numpy's power_of_ten (multiarray/calculation.c)."""
    if n < 9:
        return (1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8)[n]
    ret = 1e9
    while n > 9:
        ret *= 10.0
        n -= 1
    return ret


def _round_floats(d: list[float], decimals: int) -> list[float]:
    """numpy's PyArray_Round of float64: scale, rint, unscale (not Python's round)."""
    if decimals == 0:
        return list(map(_rint, d))
    if decimals > 0:
        f = _power_of_ten(decimals)
        return [_rint(x * f) / f for x in d]
    f = _power_of_ten(-decimals)
    return [_rint(x / f) * f for x in d]


def _np_round(a: object, decimals: int = 0, out: object = None) -> Any:
    if out is not None or type(decimals) is not int:
        raise _NIE("listnp: round() arguments")
    if type(a) is ndarray:
        arr: ndarray = a
        k = arr._t.kind
        if k == "f":
            return _wrap(_round_floats(arr._d, decimals), F64)
        if k == "i" or k == "u":
            if decimals >= 0:
                return arr.copy()
            rounded = _round_floats(list(map(float, arr._d)), decimals)
            return _wrap(_cast(rounded, F64, arr._t), arr._t)
        raise _NIE(f"listnp: round of {arr._t}")
    kind = _weak_kind(a)
    if kind == "f":
        return _round_floats([float(a)], decimals)[0]  # type: ignore[arg-type]
    if kind == "i":
        if decimals >= 0:
            return int(a)  # type: ignore[call-overload]
        return int(_round_floats([float(a)], decimals)[0])  # type: ignore[arg-type]
    if type(a) in (list, tuple):
        return _np_round(_arr1(a), decimals)
    raise _NIE(f"listnp: round of {type(a).__name__}")


around = _np_round


def sqrt(x: object) -> Any:
    if type(x) is ndarray:
        arr: ndarray = x
        if arr._t.kind not in "fiu" or arr._t.itemsize < 4:  # small ints: float16/float32
            raise _NIE(f"listnp: sqrt of {arr._t}")
        d = _cast(arr._d, arr._t, F64)
        try:
            return _wrap(list(map(math.sqrt, d)), F64)
        except ValueError:
            return _wrap([math.sqrt(v) if v >= 0 or v != v else math.nan for v in d], F64)
    raise _NIE("listnp: sqrt of a scalar")


def absolute(x: object) -> Any:
    if type(x) is ndarray:
        return abs(x)
    raise _NIE("listnp: absolute of a scalar")


def clip(a: object, a_min: object = None, a_max: object = None, **kwargs: object) -> ndarray:
    if kwargs:
        for name in ("min", "max"):
            if name in kwargs:
                if name == "min":
                    a_min = kwargs.pop(name)
                else:
                    a_max = kwargs.pop(name)
        if kwargs:
            raise _NIE("listnp: clip() arguments")
    out = _arr1(a)
    if a_min is None and a_max is None:
        raise ValueError("One of max or min must be given")
    if a_min is not None and a_max is not None:
        # numpy does not say which bound wins where they cross (its SIMD loop applies the
        # maximum last), nor what a NaN bound does
        lo, hi = _edge(a_min), _edge(a_max)
        if any(
            x > y or x != x or y != y
            for x, y in zip(
                lo._d * len(hi._d) if len(lo._d) == 1 else lo._d,
                hi._d * len(lo._d) if len(hi._d) == 1 else hi._d,
                strict=False,
            )
        ):
            raise _NIE("listnp: clip with min > max or a NaN bound")
    if a_min is not None:
        out = _minmax(out, a_min, True)
    if a_max is not None:
        out = _minmax(out, a_max, False)
    return out
