"""The array: `ndarray` (1-D, its elements a Python list `_d` of dtype `_t`), `_wrap` (the way
every array is made), basic-slice views that write through to their base, and indexing.

Its conversions, operators and methods are in its base class, `_array_methods._ArrayMethods`."""

from __future__ import annotations

import math
from _weakref import ref as _weakref
from itertools import compress as _compress

from analyzers.traces.listnp._array_methods import _ArrayMethods
from analyzers.traces.listnp._casting import _cast, _weak_kind
from analyzers.traces.listnp._dtypes import (
    _NIE,
    BOOL,
    C128,
    F64,
    _dtype_of,
    _object_new,
    _pybool,
    dtype,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from analyzers.traces.listnp._construction import _Zerod, asarray


class _Ext:
    """The rarely-set state of an array: the base it is a view of, its live views, read-only."""

    __slots__ = ("base", "limit", "ro", "spec", "views")

    def __init__(self) -> None:
        self.base: ndarray | None = None
        self.spec: object = None  # slice into the base's data, or "real" / "imag"
        self.views: list[Any] | None = None  # weak references to the views of this array
        self.limit = 16
        self.ro = 0  # 1: read-only (numpy raises ValueError), 2: shares memory listnp cannot see


def _wrap(d: list[Any], t: dtype) -> ndarray:
    a: ndarray = _object_new(ndarray)
    a._d = d
    a._t = t
    a._x = None
    return a


def _ext(a: ndarray) -> _Ext:
    x = a._x
    if x is None:
        x = a._x = _Ext()
    return x


def _view(a: ndarray, spec: slice | str) -> ndarray:
    """A view of `a` (basic slice, or the real/imag part), registered with its root base."""
    x = a._x
    if x is not None and x.base is not None:
        root = x.base
        if type(spec) is not slice or type(x.spec) is not slice:
            raise _NIE("listnp: view of a real/imag view")
        r = range(len(root._d))[x.spec][spec]
        if not r:
            spec = slice(0, 0)
        else:
            stop: int | None = r.stop
            if r.step < 0 and stop is not None and stop < 0:
                stop = None
            spec = slice(r.start, stop, r.step)
    else:
        root = a
    if type(spec) is slice:
        v = _wrap(root._d[spec], root._t)
    elif spec == "real":
        v = _wrap([z.real for z in root._d], F64)
    else:
        v = _wrap([z.imag for z in root._d], F64)
    vx = _ext(v)
    vx.base = root
    vx.spec = spec
    rx = _ext(root)
    if rx.ro:
        vx.ro = rx.ro
    views = rx.views
    if views is None:
        views = rx.views = []
    elif len(views) >= rx.limit:
        views = rx.views = [w for w in views if w() is not None]
        rx.limit = max(16, 2 * len(views))
    views.append(_weakref(v))
    return v


def _before_write(a: ndarray) -> None:
    x = a._x
    if x is not None and x.ro:
        if x.ro == 1:
            raise ValueError("assignment destination is read-only")
        raise _NIE("listnp: writing into an array that shares memory with a buffer")


def _after_write(a: ndarray) -> None:
    """Propagate a write into `a` to its base (when a view) and to the base's live views."""
    x = a._x
    if x is None:
        return
    root = x.base
    if root is not None:
        spec = x.spec
        if type(spec) is slice:
            root._d[spec] = a._d
        elif spec == "real":
            root._d = [complex(r, z.imag) for r, z in zip(a._d, root._d, strict=True)]
        else:
            root._d = [complex(z.real, i) for z, i in zip(root._d, a._d, strict=True)]
        _refresh(root, a)
    else:
        _refresh(a, None)


def _refresh(root: ndarray, skip: ndarray | None) -> None:
    x = root._x
    if x is None or not x.views:
        return
    alive = []
    for w in x.views:
        v = w()
        if v is None:
            continue
        alive.append(w)
        if v is not skip:
            spec = v._x.spec
            if type(spec) is slice:
                v._d = root._d[spec]
            elif spec == "real":
                v._d = [z.real for z in root._d]
            else:
                v._d = [z.imag for z in root._d]
    x.views = alive


def _set_data(a: ndarray, d: list[Any]) -> None:
    """Replace all of `a`'s elements (same length, already of its dtype) in place."""
    if len(d) != len(a._d):
        raise ValueError(
            f"non-broadcastable output operand with shape ({len(a._d)},) doesn't match the "
            f"broadcast shape ({len(d)},)"
        )
    _before_write(a)
    a._d[:] = d
    _after_write(a)


def _cast_scalar(t: dtype, value: object) -> Any:
    """A Python scalar stored into an array of dtype `t` (as `a[i] = value` does)."""
    k = t.kind
    tv = type(value)
    if tv is ndarray:
        arr: ndarray = value  # type: ignore[assignment]
        if len(arr._d) != 1:
            raise ValueError("setting an array element with a sequence.")
        return _cast([arr._d[0]], arr._t, t)[0]
    if k == "f":
        if tv is float:
            return value
        if tv is int or tv is _pybool or isinstance(value, int | float):
            return float(value)  # type: ignore[arg-type]
    elif k == "i" or k == "u":
        if tv is int or tv is _pybool or isinstance(value, int):
            number = int(value)  # type: ignore[call-overload]
        elif tv is float or isinstance(value, float):
            if not math.isfinite(value):  # type: ignore[arg-type]
                raise _NIE(f"listnp: storing {value!r} into {t}")
            number = int(value)  # type: ignore[call-overload]
        else:
            raise _NIE(f"listnp: storing {tv.__name__} into {t}")
        if not t._lo <= number <= t._hi:
            raise _NIE(f"listnp: {number} out of bounds for {t}")
        return number
    elif k == "b":
        if tv is _pybool:
            return value
        if tv is int or tv is float or isinstance(value, int | float):
            return value != 0
    elif k == "O":
        return value
    elif k == "c":
        if isinstance(value, int | float | complex):
            return complex(value)
    elif k == "U" and tv is str:
        return value[: t.itemsize // 4].rstrip("\x00")  # type: ignore[index]
    raise _NIE(f"listnp: storing {tv.__name__} into {t}")


class ndarray(_ArrayMethods):
    """A 1-D numpy array of Python scalars (see the module docstring)."""

    __slots__ = ("__weakref__", "_d", "_t", "_x")
    _d: list[Any]
    _t: dtype
    _x: _Ext | None
    __hash__ = None  # type: ignore[assignment]
    __array_priority__ = 0.0

    def __new__(cls, *args: object, **kwargs: object) -> ndarray:
        raise _NIE("listnp: ndarray() constructor (use array/zeros/empty)")

    def __class_getitem__(cls, item: object) -> type[ndarray]:
        return cls

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise _NIE(f"listnp: ndarray.{name}")

    # -- basic protocol
    def __len__(self) -> int:
        return len(self._d)

    def __iter__(self) -> Any:
        return iter(self._d)

    def __repr__(self) -> str:
        return f"listnp.array({self._d!r}, dtype={self._t})"

    __str__ = __repr__

    def __bool__(self) -> bool:
        d = self._d
        if len(d) == 1:
            return bool(d[0])
        if not d:
            raise ValueError(
                "The truth value of an empty array is ambiguous. Use `array.size > 0` to check "
                "that an array is not empty."
            )
        raise ValueError(
            "The truth value of an array with more than one element is ambiguous. "
            "Use a.any() or a.all()"
        )

    def __float__(self) -> float:
        raise TypeError("only 0-dimensional arrays can be converted to Python scalars")

    def __int__(self) -> int:
        raise TypeError("only 0-dimensional arrays can be converted to Python scalars")

    def __index__(self) -> int:
        raise TypeError("only integer scalar arrays can be converted to a scalar index")

    # -- attributes
    @property
    def dtype(self) -> dtype:
        return self._t

    @property
    def shape(self) -> tuple[int]:
        return (len(self._d),)

    @property
    def size(self) -> int:
        return len(self._d)

    @property
    def ndim(self) -> int:
        return 1

    @property
    def itemsize(self) -> int:
        return self._t.itemsize

    @property
    def nbytes(self) -> int:
        return self._t.itemsize * len(self._d)

    @property
    def T(self) -> ndarray:
        return self

    @property
    def real(self) -> ndarray:
        if self._t is C128:
            return _view(self, "real")
        if self._t.kind in "fiub":
            return _view(self, slice(None))
        raise _NIE(f"listnp: .real of {self._t}")

    @real.setter
    def real(self, value: object) -> None:
        if self._t is not C128:
            if self._t.kind in "fiub":
                self[:] = value
                return
            raise _NIE(f"listnp: .real of {self._t}")
        parts = _values_for(F64, value, len(self._d))
        _before_write(self)
        self._d[:] = [complex(r, z.imag) for r, z in zip(parts, self._d, strict=True)]
        _after_write(self)

    @property
    def imag(self) -> ndarray:
        if self._t is C128:
            return _view(self, "imag")
        raise _NIE(f"listnp: .imag of {self._t}")

    @imag.setter
    def imag(self, value: object) -> None:
        if self._t is not C128:
            raise _NIE(f"listnp: .imag of {self._t}")
        parts = _values_for(F64, value, len(self._d))
        _before_write(self)
        self._d[:] = [complex(z.real, i) for z, i in zip(self._d, parts, strict=True)]
        _after_write(self)

    # -- conversion (the others are in _ArrayMethods)
    def astype(self, dtype: object, copy: bool = True, **kwargs: object) -> ndarray:
        if kwargs:
            raise _NIE(f"listnp: astype({', '.join(kwargs)}=...)")
        t = _dtype_of(dtype)
        if t is self._t:
            return _wrap(list(self._d), t) if copy else self
        d = _cast(self._d, self._t, t)
        return _wrap(list(d) if d is self._d else d, t)

    # -- indexing
    def __getitem__(self, key: Any) -> Any:
        tk = type(key)
        if tk is int:
            return self._d[key]
        if tk is ndarray:
            return _take(self, key)
        if tk is slice:
            return _view(self, key)
        if tk is list:
            return _take(self, asarray(key))
        if tk is tuple and len(key) == 1:
            return self[key[0]]
        if tk is not _pybool and isinstance(key, int):
            return self._d[int(key)]
        raise _NIE(f"listnp: index {key!r}")

    def __setitem__(self, key: Any, value: object) -> None:
        if type(key) is int and self._x is None:  # the common a[i] = x, fast
            t = self._t
            tv = type(value)
            if (
                (tv is float and t is F64)
                or (tv is int and (t.kind == "i" or t.kind == "u") and t._lo <= value <= t._hi)  # type: ignore[operator]
                or (tv is bool and t is BOOL)
            ):
                self._d[key] = value
                return
        _before_write(self)
        d = self._d
        t = self._t
        tk = type(key)
        if tk is int or (tk is not _pybool and isinstance(key, int)):
            if type(value) is ndarray or _weak_kind(value) or t.kind == "O":
                d[int(key)] = _cast_scalar(t, value)
            else:
                raise _NIE(f"listnp: storing {type(value).__name__}")
        elif tk is slice:
            span = range(len(d))[key]
            d[key] = _values_for(t, value, len(span))
        else:
            if tk is list:
                key = asarray(key)
            elif tk is tuple and len(key) == 1:
                self[key[0]] = value
                return
            elif tk is not ndarray:
                raise _NIE(f"listnp: index {key!r}")
            positions = _positions(key, len(d))
            values = _values_for(t, value, len(positions), boolean=key._t is BOOL)
            for i, v in zip(positions, values, strict=True):
                d[i] = v
        _after_write(self)


def _positions(key: ndarray, n: int) -> list[int]:
    """The element positions a bool mask or an integer index array selects (bounds checked)."""
    kt = key._t
    if kt is BOOL:
        if len(key._d) != n:
            if n == 1 or len(key._d) == 1:
                raise _NIE("listnp: a boolean index broadcast along a length-1 axis")
            raise IndexError(
                f"boolean index did not match indexed array along axis 0; size of axis is {n} "
                f"but size of corresponding boolean axis is {len(key._d)}"
            )
        return list(_compress(range(n), key._d))
    if kt.kind != "i" and kt.kind != "u":
        raise IndexError(
            "arrays used as indices must be of integer (or boolean) type"
            if kt.kind in "fcOU"
            else f"index of {kt}"
        )
    k = key._d
    if k and (max(k) >= n or min(k) < -n):
        bad = max(k) if max(k) >= n else min(k)
        raise IndexError(f"index {bad} is out of bounds for axis 0 with size {n}")
    return k


def _take(a: ndarray, key: ndarray) -> ndarray:
    kt = key._t
    d = a._d
    if kt is BOOL:
        if len(key._d) != len(d):
            _positions(key, len(d))  # raises the IndexError
        return _wrap(list(_compress(d, key._d)), a._t)
    if kt.kind == "i" or kt.kind == "u":
        try:
            return _wrap(list(map(d.__getitem__, key._d)), a._t)
        except IndexError:
            _positions(key, len(d))  # raises numpy's IndexError
            raise
    _positions(key, len(d))
    raise AssertionError  # pragma: no cover


def _values_for(t: dtype, value: object, m: int, boolean: bool = False) -> list[Any]:
    """`m` values of dtype `t` to store: a scalar repeated, or an array of length m (or 1)."""
    tv = type(value)
    if tv is list or tv is tuple:
        value = asarray(value)
        tv = ndarray
    if tv is ndarray:
        arr: ndarray = value  # type: ignore[assignment]
        vd = arr._d
        if len(vd) == m:
            out = _cast(vd, arr._t, t)
            return list(out) if out is vd else out
        if len(vd) == 1:
            return [_cast(vd, arr._t, t)[0]] * m
        if boolean:
            raise ValueError(
                f"NumPy boolean array indexing assignment cannot assign {len(vd)} input values "
                f"to the {m} output values where the mask is true"
            )
        raise ValueError(
            f"could not broadcast input array from shape ({len(vd)},) into shape ({m},)"
        )
    if tv is _Zerod:
        z: _Zerod = value  # type: ignore[assignment]
        return [_cast([z._v], z._t, t)[0]] * m
    if not _weak_kind(value) and t.kind != "O":
        raise _NIE(f"listnp: storing {tv.__name__}")
    return [_cast_scalar(t, value)] * m
