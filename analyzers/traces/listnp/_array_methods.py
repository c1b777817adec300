"""ndarray's conversions, operators and numpy methods: `_ArrayMethods`, the base class of
`_array.ndarray` (one class, split to keep each module short).

They call functions of the later modules, which import `_array`: importing those here would be a
cycle, so the package `__init__` binds them into this module's globals once every module is loaded
(the TYPE_CHECKING block below declares them for mypy)."""

from __future__ import annotations

from analyzers.traces.listnp._casting import _check_int_range
from analyzers.traces.listnp._dtypes import _NIE, BOOL, OBJ, dtype

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from analyzers.traces.listnp._array import _cast_scalar, _wrap, ndarray
    from analyzers.traces.listnp._construction import asarray
    from analyzers.traces.listnp._functions import flatnonzero, repeat
    from analyzers.traces.listnp._mathfuncs import _np_round, clip
    from analyzers.traces.listnp._reductions import _extreme, cumsum
    from analyzers.traces.listnp._sorting import argsort, searchsorted, sort

    # these take an `ndarray`, which `self` is at run time (to mypy it is an _ArrayMethods)
    def _arith(a: object, b: object, op: int, refl: bool) -> ndarray: ...
    def _compare(a: object, b: object, op: int, refl: bool) -> ndarray: ...
    def _power(a: object, b: object) -> ndarray: ...
    def _inplace(a: object, result: ndarray) -> ndarray: ...
    def _sum(a: object, dtype: object = None) -> Any: ...
    def _mean(a: object, dtype: object = None) -> float: ...
    def _argextreme(a: object, is_max: bool) -> int: ...
    def _set_data(a: object, d: list[Any]) -> None: ...
    def _take(a: object, key: ndarray) -> ndarray: ...
    def _view(a: object, spec: slice | str) -> ndarray: ...


# the operators' codes (_elementwise dispatches on them)
_ADD, _SUB, _MUL, _TDIV, _FDIV, _MOD, _AND, _OR, _XOR = range(9)
_LT, _LE, _GT, _GE, _EQ, _NE = range(10, 16)
_MAX, _MIN = 20, 21


class _ArrayMethods:
    """The methods of `ndarray` (see `_array`) that delegate to the function modules."""

    __slots__ = ()
    _d: list[Any]
    _t: dtype

    def __contains__(self, value: object) -> bool:
        return _compare(self, value, _EQ, False).any()

    def __copy__(self) -> ndarray:
        return self.copy()

    def __deepcopy__(self, memo: object) -> ndarray:
        if self._t is OBJ:
            raise _NIE("listnp: deepcopy of an object array")
        return self.copy()

    # -- conversion
    def tolist(self) -> list[Any]:
        return list(self._d)

    def item(self, *args: object) -> Any:
        if args:
            if len(args) == 1 and type(args[0]) is int:
                return self._d[args[0]]
            raise _NIE("listnp: item() arguments")
        if len(self._d) != 1:
            raise ValueError("can only convert an array of size 1 to a Python scalar")
        return self._d[0]

    def copy(self, order: str = "C") -> ndarray:
        return _wrap(list(self._d), self._t)

    def tobytes(self, order: str = "C") -> bytes:
        t = self._t
        if t is BOOL:
            return bytes(self._d)
        if not t._fmt:
            raise _NIE(f"listnp: tobytes of {t}")
        from array import array as _pyarray  # imported on first use: ~0.3 ms of the import

        return _pyarray(t._fmt, self._d).tobytes()

    def ravel(self, order: str = "C") -> ndarray:
        return _view(self, slice(None))

    def flatten(self, order: str = "C") -> ndarray:
        return self.copy()

    def reshape(self, *shape: object) -> ndarray:
        if len(shape) == 1 and type(shape[0]) is tuple:
            shape = shape[0]
        if shape in ((-1,), (len(self._d),)):
            return _view(self, slice(None))
        raise _NIE(f"listnp: reshape to {shape}")

    def fill(self, value: object) -> None:
        v = _cast_scalar(self._t, value)
        _set_data(self, [v] * len(self._d))

    # -- arithmetic and comparison operators
    def __add__(self, other: object) -> ndarray:
        return _arith(self, other, _ADD, False)

    def __radd__(self, other: object) -> ndarray:
        return _arith(self, other, _ADD, True)

    def __sub__(self, other: object) -> ndarray:
        return _arith(self, other, _SUB, False)

    def __rsub__(self, other: object) -> ndarray:
        return _arith(self, other, _SUB, True)

    def __mul__(self, other: object) -> ndarray:
        return _arith(self, other, _MUL, False)

    def __rmul__(self, other: object) -> ndarray:
        return _arith(self, other, _MUL, True)

    def __truediv__(self, other: object) -> ndarray:
        return _arith(self, other, _TDIV, False)

    def __rtruediv__(self, other: object) -> ndarray:
        return _arith(self, other, _TDIV, True)

    def __floordiv__(self, other: object) -> ndarray:
        return _arith(self, other, _FDIV, False)

    def __rfloordiv__(self, other: object) -> ndarray:
        return _arith(self, other, _FDIV, True)

    def __mod__(self, other: object) -> ndarray:
        return _arith(self, other, _MOD, False)

    def __rmod__(self, other: object) -> ndarray:
        return _arith(self, other, _MOD, True)

    def __pow__(self, other: object) -> ndarray:
        return _power(self, other)

    def __and__(self, other: object) -> ndarray:
        return _arith(self, other, _AND, False)

    def __rand__(self, other: object) -> ndarray:
        return _arith(self, other, _AND, True)

    def __or__(self, other: object) -> ndarray:
        return _arith(self, other, _OR, False)

    def __ror__(self, other: object) -> ndarray:
        return _arith(self, other, _OR, True)

    def __xor__(self, other: object) -> ndarray:
        return _arith(self, other, _XOR, False)

    def __rxor__(self, other: object) -> ndarray:
        return _arith(self, other, _XOR, True)

    def __lt__(self, other: object) -> ndarray:
        return _compare(self, other, _LT, False)

    def __le__(self, other: object) -> ndarray:
        return _compare(self, other, _LE, False)

    def __gt__(self, other: object) -> ndarray:
        return _compare(self, other, _GT, False)

    def __ge__(self, other: object) -> ndarray:
        return _compare(self, other, _GE, False)

    def __eq__(self, other: object) -> ndarray:  # type: ignore[override]
        return _compare(self, other, _EQ, False)

    def __ne__(self, other: object) -> ndarray:  # type: ignore[override]
        return _compare(self, other, _NE, False)

    def __neg__(self) -> ndarray:
        k = self._t.kind
        if k == "f" or k == "c":
            return _wrap([-x for x in self._d], self._t)
        if k == "i":
            return _wrap(_check_int_range([-x for x in self._d], self._t), self._t)
        if k == "b":
            raise TypeError(
                "The numpy boolean negative, the `-` operator, is not supported, use the `~` "
                "operator or the logical_not function instead."
            )
        raise _NIE(f"listnp: -array of {self._t}")

    def __pos__(self) -> ndarray:
        if self._t.kind in "fiuc":
            return self.copy()
        raise _NIE(f"listnp: +array of {self._t}")

    def __abs__(self) -> ndarray:
        k = self._t.kind
        if k == "f" or k == "i":
            out = list(map(abs, self._d))
            return _wrap(_check_int_range(out, self._t) if k == "i" else out, self._t)
        if k == "u" or k == "b":
            return self.copy()
        raise _NIE(f"listnp: abs of {self._t}")

    def __invert__(self) -> ndarray:
        t = self._t
        if t is BOOL:
            return _wrap([not x for x in self._d], t)
        if t.kind == "i":
            return _wrap([~x for x in self._d], t)
        if t.kind == "u":
            hi = t._hi
            return _wrap([hi - x for x in self._d], t)
        if t.kind == "f":
            raise TypeError("ufunc 'invert' not supported for the input types")
        raise _NIE(f"listnp: ~array of {t}")

    # in-place operators write into this array (its views see the change), as numpy's do
    def __iadd__(self, other: object) -> ndarray:
        return _inplace(self, _arith(self, other, _ADD, False))

    def __isub__(self, other: object) -> ndarray:
        return _inplace(self, _arith(self, other, _SUB, False))

    def __imul__(self, other: object) -> ndarray:
        return _inplace(self, _arith(self, other, _MUL, False))

    def __itruediv__(self, other: object) -> ndarray:
        return _inplace(self, _arith(self, other, _TDIV, False))

    def __ifloordiv__(self, other: object) -> ndarray:
        return _inplace(self, _arith(self, other, _FDIV, False))

    def __imod__(self, other: object) -> ndarray:
        return _inplace(self, _arith(self, other, _MOD, False))

    def __iand__(self, other: object) -> ndarray:
        return _inplace(self, _arith(self, other, _AND, False))

    def __ior__(self, other: object) -> ndarray:
        return _inplace(self, _arith(self, other, _OR, False))

    def __ixor__(self, other: object) -> ndarray:
        return _inplace(self, _arith(self, other, _XOR, False))

    # -- methods
    def sum(self, axis: object = None, dtype: object = None, **kwargs: object) -> Any:
        if axis not in (None, 0, -1) or kwargs:
            raise _NIE("listnp: sum() arguments")
        return _sum(self, dtype)

    def mean(self, axis: object = None, dtype: object = None, **kwargs: object) -> Any:
        if axis not in (None, 0, -1) or kwargs:
            raise _NIE("listnp: mean() arguments")
        return _mean(self, dtype)

    def max(self, axis: object = None, **kwargs: object) -> Any:
        if axis not in (None, 0, -1) or kwargs:
            raise _NIE("listnp: max() arguments")
        return _extreme(self._d, self._t, True, "maximum")

    def min(self, axis: object = None, **kwargs: object) -> Any:
        if axis not in (None, 0, -1) or kwargs:
            raise _NIE("listnp: min() arguments")
        return _extreme(self._d, self._t, False, "minimum")

    def any(self, axis: object = None, **kwargs: object) -> bool:
        if axis not in (None, 0, -1) or kwargs or self._t.kind not in "fiubc":
            raise _NIE("listnp: any() of this array")
        return any(self._d)

    def all(self, axis: object = None, **kwargs: object) -> bool:
        if axis not in (None, 0, -1) or kwargs or self._t.kind not in "fiubc":
            raise _NIE("listnp: all() of this array")
        return all(self._d)

    def argmax(self, axis: object = None) -> int:
        if axis not in (None, 0, -1):
            raise _NIE("listnp: argmax(axis)")
        return _argextreme(self, True)

    def argmin(self, axis: object = None) -> int:
        if axis not in (None, 0, -1):
            raise _NIE("listnp: argmin(axis)")
        return _argextreme(self, False)

    def cumsum(self, axis: object = None, dtype: object = None) -> ndarray:
        if axis not in (None, 0, -1) or dtype is not None:
            raise _NIE("listnp: cumsum() arguments")
        return cumsum(self)

    def argsort(self, axis: object = -1, kind: str | None = None, order: object = None) -> ndarray:
        if axis not in (-1, 0) or order is not None:
            raise _NIE("listnp: argsort() arguments")
        return argsort(self, kind=kind)

    def sort(self, axis: object = -1, kind: str | None = None, order: object = None) -> None:
        if axis not in (-1, 0) or order is not None:
            raise _NIE("listnp: sort() arguments")
        _set_data(self, sort(self, kind=kind)._d)

    def searchsorted(self, v: object, side: str = "left", sorter: object = None) -> Any:
        return searchsorted(self, v, side=side, sorter=sorter)

    def repeat(self, repeats: object, axis: object = None) -> ndarray:
        return repeat(self, repeats, axis=axis)

    def round(self, decimals: int = 0, out: object = None) -> ndarray:
        if out is not None:
            raise _NIE("listnp: round(out=)")
        out_: ndarray = _np_round(self, decimals)
        return out_

    def clip(self, min: object = None, max: object = None, **kwargs: object) -> ndarray:
        return clip(self, min, max, **kwargs)

    def nonzero(self) -> tuple[ndarray]:
        return (flatnonzero(self),)

    def take(self, indices: object, axis: object = None) -> Any:
        if axis not in (None, 0):
            raise _NIE("listnp: take(axis)")
        if type(indices) is int:
            return self._d[indices]
        return _take(self, asarray(indices))
