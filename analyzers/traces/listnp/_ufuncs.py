"""The ufunc objects (np.maximum(a, b, out=), np.maximum.accumulate / reduceat, np.add.reduce,
...) and the logical functions."""

from __future__ import annotations

import math
import operator
from itertools import accumulate as _accumulate

from analyzers.traces.listnp._array import _set_data, _wrap, ndarray
from analyzers.traces.listnp._array_methods import (
    _ADD,
    _AND,
    _EQ,
    _FDIV,
    _GE,
    _GT,
    _LE,
    _LT,
    _MAX,
    _MIN,
    _MOD,
    _MUL,
    _NE,
    _OR,
    _SUB,
    _TDIV,
    _XOR,
)
from analyzers.traces.listnp._casting import _cast, _same_kind, _weak_kind
from analyzers.traces.listnp._construction import _arr1
from analyzers.traces.listnp._dtypes import _NIE, BOOL, C128, _pybool
from analyzers.traces.listnp._elementwise import _arith, _compare, _has_nan, _minmax, _mixed_zero
from analyzers.traces.listnp._reductions import _extreme, _sum, cumsum

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


_and = operator.and_
_ne = operator.ne
_or = operator.or_


class ufunc:
    """The binary ufuncs the engine calls as functions (np.maximum(a, b), np.add(a, b, out=),
    np.maximum.accumulate / reduceat)."""

    __slots__ = ("__name__", "_op")

    def __init__(self, name: str, op: int) -> None:
        self.__name__ = name
        self._op = op

    def __repr__(self) -> str:
        return f"<listnp ufunc '{self.__name__}'>"

    def __call__(
        self,
        a: object,
        b: object,
        out: object = None,
        *,
        where: object = True,
        casting: str = "same_kind",
        dtype: object = None,
    ) -> Any:
        if dtype is not None:
            raise _NIE(f"listnp: {self.__name__}(dtype=)")
        result = self._apply(a, b)
        if type(out) is tuple and len(out) == 1:
            out = out[0]
        if out is None:
            if where is not True:
                raise _NIE(f"listnp: {self.__name__}(where=) without out=")
            return result
        if type(out) is not ndarray:
            raise _NIE(f"listnp: {self.__name__}(out=) of {type(out).__name__}")
        if type(result) is not ndarray:
            raise _NIE(f"listnp: {self.__name__} of scalars with out=")
        target: ndarray = out
        n = len(target._d)
        if len(result._d) != n:
            if len(result._d) == 1:
                result = _wrap(result._d * n, result._t)
            else:
                raise ValueError(
                    f"non-broadcastable output operand with shape ({n},) doesn't match the "
                    f"broadcast shape ({len(result._d)},)"
                )
        rt, tt = result._t, target._t
        if rt is not tt:
            if casting == "same_kind" and not _same_kind(rt, tt):
                raise TypeError(
                    f"Cannot cast ufunc '{self.__name__}' output from dtype('{rt}') to "
                    f"dtype('{tt}') with casting rule 'same_kind'"
                )
            if casting not in ("same_kind", "unsafe"):
                raise _NIE(f"listnp: casting={casting!r}")
        values = _cast(result._d, rt, tt)
        if where is True:
            _set_data(target, values)
            return target
        mask = _arr1(where)
        if mask._t is not BOOL:
            raise _NIE("listnp: where= of a non-bool array")
        md = mask._d
        if len(md) != n:
            if len(md) == 1:
                md = md * n
            else:
                raise ValueError("where= does not broadcast")
        merged = [v if m else old for m, v, old in zip(md, values, target._d, strict=True)]
        _set_data(target, merged)
        return target

    def _apply(self, a: object, b: object) -> Any:
        op = self._op
        if op in (_MAX, _MIN):
            return _minmax(a, b, op == _MAX)
        if type(a) is ndarray:
            if op < _LT:
                return _arith(a, b, op, False)
            return _compare(a, b, op, False)
        if type(b) is ndarray:
            if op < _LT:
                return _arith(b, a, op, True)
            return _compare(b, a, op, True)
        if type(a) in (list, tuple):
            return self._apply(_arr1(a), b)
        if type(b) in (list, tuple):
            return self._apply(a, _arr1(b))
        raise _NIE(f"listnp: {self.__name__} of two scalars")

    def reduce(self, a: object, axis: object = 0) -> Any:
        if axis not in (0, None, -1):
            raise _NIE("listnp: reduce(axis)")
        arr = _arr1(a)
        if self._op == _MAX:
            return arr.max()
        if self._op == _MIN:
            return arr.min()
        if self._op == _ADD:
            return _sum(arr)
        raise _NIE(f"listnp: {self.__name__}.reduce")

    def accumulate(self, a: object, axis: int = 0) -> ndarray:
        if axis not in (0, -1):
            raise _NIE("listnp: accumulate(axis)")
        arr = _arr1(a)
        op = self._op
        if op == _ADD:
            return cumsum(arr)
        if op != _MAX and op != _MIN:
            raise _NIE(f"listnp: {self.__name__}.accumulate")
        d = arr._d
        t = arr._t
        k = t.kind
        is_max = op == _MAX
        if k in "iub":
            return _wrap(_running(d, is_max), t)
        if k == "f":
            if 0.0 in d and _mixed_zero(d):
                raise _NIE("listnp: maximum/minimum.accumulate over +0.0 and -0.0")
            if _has_nan(d):
                p = [x == x for x in d].index(False)
                return _wrap(_running(d[:p], is_max) + [math.nan] * (len(d) - p), t)
            return _wrap(_running(d, is_max), t)
        if t is C128:
            pairs = [(z.real, z.imag) for z in d]
            if not _has_nan([x for p in pairs for x in p]):
                # without NaN numpy's complex maximum is the lexicographic one of (real, imag),
                # ties to the first operand: Python's max/min of tuples
                running = _accumulate(pairs, max if is_max else min)
                return _wrap([complex(r, i) for r, i in running], t)
            return _wrap(list(_accumulate(d, _cmax if is_max else _cmin)), t)
        raise _NIE(f"listnp: {self.__name__}.accumulate of {t}")

    def reduceat(self, a: object, indices: object, axis: int = 0) -> ndarray:
        if axis not in (0, -1):
            raise _NIE("listnp: reduceat(axis)")
        op = self._op
        if op != _MAX and op != _MIN:
            raise _NIE(f"listnp: {self.__name__}.reduceat")
        arr = _arr1(a)
        idx = _arr1(indices)
        if idx._t.kind not in "iu":
            raise TypeError("Cannot cast array data to int64 according to the rule 'safe'")
        d = arr._d
        t = arr._t
        n = len(d)
        ix = idx._d
        if ix and (min(ix) < 0 or max(ix) >= n):
            bad = min(ix) if min(ix) < 0 else max(ix)
            raise IndexError(f"index {bad} out-of-bounds in {self.__name__}.reduceat [0, {n})")
        if not ix:
            return _wrap([], t)
        ends = [*ix[1:], n]
        is_max = op == _MAX
        k = t.kind
        if k in "iub" or (k == "f" and not _has_nan(d) and not (0.0 in d and _mixed_zero(d))):
            # no NaN, no tie of zeros of two signs: Python's max/min of each run is numpy's
            fn = max if is_max else min
            out = [fn(d[s:e_]) if e_ - s > 1 else d[s] for s, e_ in zip(ix, ends, strict=True)]
            return _wrap(out, t)
        name = "maximum" if is_max else "minimum"
        out = []
        for s, e_ in zip(ix, ends, strict=True):
            if s < e_:
                out.append(_extreme(d[s:e_], t, is_max, name))
            else:
                out.append(d[s])
        return _wrap(out, t)


def _running(d: list[Any], is_max: bool) -> list[Any]:
    """The running maximum (minimum) of NaN-free values; a tie keeps the earlier value."""
    if not d:
        return []
    m = d[0]
    if is_max:
        return [m := x if x > m else m for x in d]
    return [m := x if x < m else m for x in d]


def _cge(xr: float, xi: float, yr: float, yi: float) -> bool:
    return (xr > yr and xi == xi and yi == yi) or (xr == yr and xi >= yi)


def _cmax(a: complex, b: complex) -> complex:
    """numpy's CDOUBLE_maximum (umath/loops.c.src): lexicographic, NaN propagating."""
    ar, ai = a.real, a.imag
    if ar != ar or ai != ai or _cge(ar, ai, b.real, b.imag):
        return a
    return b


def _cmin(a: complex, b: complex) -> complex:
    ar, ai = a.real, a.imag
    br, bi = b.real, b.imag
    if ar != ar or ai != ai or _cge(br, bi, ar, ai):
        return a
    return b


maximum = ufunc("maximum", _MAX)
minimum = ufunc("minimum", _MIN)
add = ufunc("add", _ADD)
subtract = ufunc("subtract", _SUB)
multiply = ufunc("multiply", _MUL)
true_divide = ufunc("divide", _TDIV)
divide = true_divide
floor_divide = ufunc("floor_divide", _FDIV)
remainder = ufunc("remainder", _MOD)
mod = remainder
bitwise_and = ufunc("bitwise_and", _AND)
bitwise_or = ufunc("bitwise_or", _OR)
bitwise_xor = ufunc("bitwise_xor", _XOR)
less = ufunc("less", _LT)
less_equal = ufunc("less_equal", _LE)
greater = ufunc("greater", _GT)
greater_equal = ufunc("greater_equal", _GE)
equal = ufunc("equal", _EQ)
not_equal = ufunc("not_equal", _NE)


def logical_not(x: object) -> ndarray:
    arr = _arr1(x)
    if arr._t.kind not in "fiub":
        raise _NIE(f"listnp: logical_not of {arr._t}")
    return _wrap([not v for v in arr._d], BOOL)


def _logical(a: object, b: object, fn: Callable[[bool, bool], bool]) -> ndarray:
    x = _arr1(a).astype(BOOL, copy=False)
    y = b if _weak_kind(b) in ("b", "i", "f") else _arr1(b).astype(BOOL, copy=False)
    if type(y) is ndarray:
        if len(y._d) != len(x._d):
            raise ValueError("operands could not be broadcast together")
        return _wrap(list(map(fn, x._d, y._d)), BOOL)
    yv = _pybool(y)
    return _wrap([fn(v, yv) for v in x._d], BOOL)


def logical_and(a: object, b: object) -> ndarray:
    return _logical(a, b, _and)


def logical_or(a: object, b: object) -> ndarray:
    return _logical(a, b, _or)


def logical_xor(a: object, b: object) -> ndarray:
    return _logical(a, b, _ne)
