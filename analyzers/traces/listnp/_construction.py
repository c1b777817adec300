"""Making arrays: `array` / `asarray` (numpy's dtype inference from Python values), zeros, ones,
full and their *_like, arange, linspace, frombuffer, fromiter; `_Zerod`, the 0-d array of
`np.asarray(scalar)`; `_arr1`, an argument as a 1-D array."""

from __future__ import annotations

import math
from itertools import islice as _islice

from analyzers.traces.listnp._array import _ext, _values_for, _wrap, ndarray
from analyzers.traces.listnp._casting import _DEFAULT_OF_KIND, _cast, _plain, _weak_kind
from analyzers.traces.listnp._dtypes import (
    _INT64_MAX,
    _INT64_MIN,
    _NIE,
    BOOL,
    C128,
    F64,
    I64,
    OBJ,
    _dtype_of,
    _pybool,
    _unicode,
    dtype,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any


def _infer(values: list[Any]) -> tuple[list[Any], dtype]:
    """numpy's dtype for a list of Python scalars, and the elements in it."""
    types = set(map(type, values))
    if not types or types == {float}:
        return values, F64
    if types == {int}:
        if min(values) < _INT64_MIN or max(values) > _INT64_MAX:
            raise _NIE("listnp: integers beyond int64")
        return values, I64
    if types == {_pybool}:
        return values, BOOL
    if types == {int, _pybool}:
        out = list(map(int, values))
        if min(out) < _INT64_MIN or max(out) > _INT64_MAX:
            raise _NIE("listnp: integers beyond int64")
        return out, I64
    if types <= {float, int, _pybool}:
        return list(map(float, values)), F64
    if types == {str}:
        texts: list[str] = [s.rstrip("\x00") for s in values]
        return texts, _unicode(max(1, *[len(x) for x in values]))
    if types <= {complex, float, int, _pybool}:
        return list(map(complex, values)), C128
    if type(None) in types and types <= {type(None), str, int, float, _pybool}:
        if types & {float, int} and min(x for x in values if type(x) in (int, float)) < _INT64_MIN:
            raise _NIE("listnp: integers beyond int64")
        return values, OBJ
    raise _NIE(f"listnp: array of {sorted(t.__name__ for t in types)}")


_SCALAR_TYPES = frozenset({float, int, bool, str, type(None), complex})


def _from_values(values: list[Any], t: dtype) -> list[Any]:
    """Python values as elements of dtype `t`, as `np.array(values, dtype=t)` converts them
    (None -> NaN in a float column; int() truncation, TypeError for None and OverflowError beyond
    the range of an integer column: load_fast relies on those two)."""
    from array import array as _pyarray  # C-speed conversion and range checks

    k = t.kind
    if k == "f":
        try:
            return _pyarray("d", values).tolist()
        except TypeError:
            pass
        out = []
        for v in values:
            tv = type(v)
            if tv is float:
                out.append(v)
            elif v is None:
                out.append(math.nan)
            elif tv is int or tv is _pybool:
                out.append(float(v))
            else:
                raise _NIE(f"listnp: {tv.__name__} in a float64 array")
        return out
    if k == "i" or k == "u":
        try:
            if t._fmt:
                return _pyarray(t._fmt, values).tolist()
        except OverflowError:
            raise OverflowError(f"Python integer out of bounds for {t}") from None
        except TypeError:
            pass
        out = []
        for v in values:
            tv = type(v)
            if tv is int or tv is _pybool or tv is float or v is None:
                number = int(v)  # TypeError for None, ValueError for nan: numpy's
            else:
                raise _NIE(f"listnp: {tv.__name__} in an integer array")
            if not t._lo <= number <= t._hi:
                raise OverflowError(f"Python integer {number} out of bounds for {t}")
            out.append(number)
        return out
    if k == "b":
        if all(type(v) is _pybool for v in values):
            return list(values)
        if all(type(v) in (int, float) for v in values):
            return [v != 0 for v in values]
        raise _NIE("listnp: bool array of non-numbers")
    if k == "O":
        if not set(map(type, values)) <= _SCALAR_TYPES:
            raise _NIE("listnp: object array of non-scalars")
        return list(values)
    if k == "c":
        if all(type(v) in (complex, float, int, _pybool) for v in values):
            return list(map(complex, values))
        raise _NIE("listnp: complex array of non-numbers")
    raise _NIE(f"listnp: array of dtype {t}")


def array(obj: object, dtype: object = None, *, copy: bool = True, **kwargs: object) -> Any:
    """`np.array`: a copy of an array, or an array of a list/tuple/range of Python scalars."""
    if kwargs:
        raise _NIE(f"listnp: array({', '.join(kwargs)}=...)")
    tobj = type(obj)
    if tobj is ndarray:
        arr: ndarray = obj  # type: ignore[assignment]
        if dtype is None:
            return _wrap(list(arr._d), arr._t) if copy else arr
        t = _dtype_of(dtype)
        if t is arr._t and not copy:
            return arr
        d = _cast(arr._d, arr._t, t)
        return _wrap(list(d) if d is arr._d else d, t)
    if tobj is list or tobj is tuple or tobj is range:
        values = list(obj)  # type: ignore[call-overload]
        # nested sequences (2-D arrays) fail the dtype checks of _infer and _from_values
        if dtype is None:
            d, t = _infer(values)
            return _wrap(d, t)
        t = _dtype_of(dtype)
        if t.kind == "U":
            raise _NIE("listnp: str dtype argument")
        return _wrap(_from_values(values, t), t)
    kind = _weak_kind(obj)
    if kind:
        value = _plain(obj, kind)
        if dtype is None:
            t = _DEFAULT_OF_KIND[kind] if kind != "U" else _unicode(max(1, len(value)))
            if t is I64 and not _INT64_MIN <= value <= _INT64_MAX:
                raise _NIE("listnp: integer beyond int64")
        else:
            t = _dtype_of(dtype)
        return _Zerod(_from_values([value], t)[0] if kind != "U" else value, t)
    if tobj is _Zerod:
        z: _Zerod = obj  # type: ignore[assignment]
        t = z._t if dtype is None else _dtype_of(dtype)
        return _Zerod(_cast([z._v], z._t, t)[0], t)
    raise _NIE(f"listnp: array() of {tobj.__name__}")


def asarray(obj: object, dtype: object = None, **kwargs: Any) -> Any:
    """`np.asarray`: the array itself when it already has the dtype."""
    if type(obj) is ndarray and (dtype is None or _dtype_of(dtype) is obj._t) and not kwargs:
        return obj
    return array(obj, dtype, **kwargs)


asanyarray = asarray


def ascontiguousarray(obj: object, dtype: object = None, **kwargs: object) -> Any:
    return asarray(obj, dtype, **kwargs)


def _arr1(obj: object) -> ndarray:
    """`obj` as a 1-D array (a list is converted; a scalar is not accepted)."""
    if type(obj) is ndarray:
        return obj
    out = array(obj)
    if type(out) is not ndarray:
        raise _NIE("listnp: a scalar where an array is expected")
    return out


def _size(shape: object) -> int:
    if type(shape) is int:
        if shape < 0:
            raise ValueError("negative dimensions are not allowed")
        return shape
    if type(shape) is tuple and len(shape) == 1 and type(shape[0]) is int:
        return _size(shape[0])
    if not isinstance(shape, _pybool) and isinstance(shape, int):
        return _size(int(shape))
    raise _NIE(f"listnp: shape {shape!r}")


_ZERO = {"f": 0.0, "i": 0, "u": 0, "b": False, "O": 0, "c": 0j, "U": ""}
_ONE = {"f": 1.0, "i": 1, "u": 1, "b": True, "O": 1, "c": 1 + 0j}


def zeros(shape: object, dtype: object = None, **kwargs: object) -> ndarray:
    if kwargs:
        raise _NIE("listnp: zeros() arguments")
    t = _dtype_of(dtype)
    return _wrap([_ZERO[t.kind]] * _size(shape), t)


empty = zeros  # numpy leaves the elements undefined; callers write them all


def ones(shape: object, dtype: object = None, **kwargs: object) -> ndarray:
    if kwargs:
        raise _NIE("listnp: ones() arguments")
    t = _dtype_of(dtype)
    if t.kind == "U":
        raise _NIE("listnp: ones of str")
    return _wrap([_ONE[t.kind]] * _size(shape), t)


def full(shape: object, fill_value: object, dtype: object = None, **kwargs: object) -> ndarray:
    if kwargs:
        raise _NIE("listnp: full() arguments")
    n = _size(shape)
    if dtype is None:
        z = array(fill_value)
        if type(z) is not _Zerod:
            raise _NIE("listnp: full() with an array fill value")
        return _wrap([z._v] * n, z._t)
    t = _dtype_of(dtype)
    return _wrap(_values_for(t, fill_value, n), t)


def _like(a: object, dtype: object) -> tuple[int, dtype]:
    arr = _arr1(a)
    return len(arr._d), (arr._t if dtype is None else _dtype_of(dtype))


def zeros_like(a: object, dtype: object = None) -> ndarray:
    n, t = _like(a, dtype)
    return _wrap([_ZERO[t.kind]] * n, t)


empty_like = zeros_like


def ones_like(a: object, dtype: object = None) -> ndarray:
    n, t = _like(a, dtype)
    return ones(n, t)


def full_like(a: object, fill_value: object, dtype: object = None) -> ndarray:
    n, t = _like(a, dtype)
    return full(n, fill_value, t)


def arange(
    start: object, stop: object = None, step: object = None, dtype: object = None
) -> ndarray:
    if stop is None:
        start, stop = 0, start
    if step is None:
        step = 1
    if type(start) is not int or type(stop) is not int or type(step) is not int:
        raise _NIE("listnp: arange of non-integers")
    r = range(start, stop, step)
    t = I64 if dtype is None else _dtype_of(dtype)
    if t.kind == "f":
        return _wrap(list(map(float, r)), t)
    if t.kind not in "iu" or (r and (min(r) < t._lo or max(r) > t._hi)):
        raise _NIE(f"listnp: arange of {t}")
    return _wrap(list(r), t)


def linspace(
    start: object, stop: object, num: int = 50, endpoint: bool = True, **kwargs: object
) -> ndarray:
    """numpy's linspace (function_base.py) step by step, for scalar ends."""
    if kwargs or type(num) is not int:
        raise _NIE("listnp: linspace() arguments")
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    if _weak_kind(start) not in ("i", "f", "b") or _weak_kind(stop) not in ("i", "f", "b"):
        raise _NIE("listnp: linspace of non-scalars")
    lo = float(start)  # type: ignore[arg-type]
    hi = float(stop)  # type: ignore[arg-type]
    div = (num - 1) if endpoint else num
    delta = hi - lo
    y = list(map(float, range(num)))
    if div > 0:
        step = delta / div
        y = [x / div * delta for x in y] if step == 0 else [x * step for x in y]
    else:
        y = [x * delta for x in y]
    y = [x + lo for x in y]
    if endpoint and num > 1:
        y[-1] = hi
    return _wrap(y, F64)


def frombuffer(
    buffer: object, dtype: object = float, count: int = -1, offset: int = 0, **kwargs: object
) -> ndarray:
    if kwargs:
        raise _NIE("listnp: frombuffer() arguments")
    t = _dtype_of(dtype)
    fmt = "?" if t is BOOL else t._fmt
    if not fmt:
        raise _NIE(f"listnp: frombuffer of {t}")
    with memoryview(buffer) as view, view.cast("B") as raw:  # type: ignore[arg-type]
        size = len(raw)
        if offset < 0 or offset > size:
            raise ValueError("offset must be non-negative and no greater than buffer length")
        avail = size - offset
        if count < 0:
            if avail % t.itemsize:
                raise ValueError("buffer size must be a multiple of element size")
            count = avail // t.itemsize
        elif count * t.itemsize > avail:
            raise ValueError("buffer is smaller than requested size")
        with raw[offset : offset + count * t.itemsize] as part:
            values = part.cast(fmt).tolist()  # type: ignore[call-overload]
        readonly = view.readonly
    out = _wrap(values, t)
    _ext(out).ro = 1 if readonly else 2
    return out


def fromiter(iterable: Iterable[Any], dtype: object, count: int = -1) -> ndarray:
    t = _dtype_of(dtype)
    if count >= 0:
        values = list(_islice(iterable, count))
        if len(values) < count:
            raise ValueError(
                f"iterator too short: Expected {count} but iterator had only {len(values)} items."
            )
    else:
        values = list(iterable)
    return _wrap(_from_values(values, t), t)


class _Zerod:
    """A 0-d array (np.asarray(scalar)): only what broadcasting a scalar needs."""

    __slots__ = ("_t", "_v")

    def __init__(self, value: object, t: dtype) -> None:
        self._v = value
        self._t = t

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise _NIE(f"listnp: 0-d array .{name}")

    @property
    def dtype(self) -> dtype:
        return self._t

    @property
    def shape(self) -> tuple[()]:
        return ()

    @property
    def ndim(self) -> int:
        return 0

    @property
    def size(self) -> int:
        return 1

    def item(self) -> Any:
        return self._v

    def tolist(self) -> Any:
        return self._v

    def astype(self, dtype: object) -> _Zerod:
        t = _dtype_of(dtype)
        return _Zerod(_cast([self._v], self._t, t)[0], t)

    def copy(self) -> _Zerod:
        return _Zerod(self._v, self._t)

    def __float__(self) -> float:
        return float(self._v)  # type: ignore[arg-type]

    def __int__(self) -> int:
        number: int = int(self._v)  # type: ignore[call-overload]
        return number

    def __bool__(self) -> bool:
        return bool(self._v)

    def __len__(self) -> int:
        raise TypeError("len() of unsized object")

    def __repr__(self) -> str:
        return f"listnp.array({self._v!r}, dtype={self._t})"
