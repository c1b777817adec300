"""numpy's array functions: concatenate, append, nonzero, where, choose, diff, repeat, stack
(2-D columns, `_Stacked`) and broadcast_to."""

from __future__ import annotations

import operator
from functools import reduce as _reduce
from itertools import chain as _chain
from itertools import compress as _compress
from itertools import repeat as _repeat

from analyzers.traces.listnp._array import _cast_scalar, _ext, _wrap, ndarray
from analyzers.traces.listnp._casting import (
    _DEFAULT_OF_KIND,
    _cast,
    _check_int_range,
    _plain,
    _promote,
    _weak_kind,
    _weak_pair,
    _weak_promote,
)
from analyzers.traces.listnp._construction import _arr1, _size, _Zerod, array
from analyzers.traces.listnp._dtypes import _NIE, BOOL, F64, I64, U64, _dtype_of, _pybool, dtype

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

_ne = operator.ne
_sub = operator.sub


def concatenate(arrays: Sequence[object], axis: object = 0, dtype: object = None) -> ndarray:
    if axis not in (0, None, -1):
        raise _NIE("listnp: concatenate(axis)")
    if isinstance(arrays, ndarray):
        raise _NIE("listnp: concatenate of a 2-D array")
    parts = []
    for a in arrays:
        if type(a) is ndarray:
            parts.append(a)
        elif type(a) is list or type(a) is tuple or type(a) is range:
            parts.append(_arr1(a))
        elif type(a) is _Zerod or _weak_kind(a):
            raise ValueError("zero-dimensional arrays cannot be concatenated")
        else:
            raise _NIE(f"listnp: concatenate of {type(a).__name__}")
    if not parts:
        raise ValueError("need at least one array to concatenate")
    t = _reduce(_promote, [p._t for p in parts]) if dtype is None else _dtype_of(dtype)
    if len(parts) == 1:
        d = _cast(parts[0]._d, parts[0]._t, t)
        return _wrap(list(d) if d is parts[0]._d else d, t)
    return _wrap(list(_chain.from_iterable(_cast(p._d, p._t, t) for p in parts)), t)


def append(arr: object, values: object, axis: object = None) -> ndarray:
    if axis is not None:
        raise _NIE("listnp: append(axis)")
    a = _arr1(arr)
    if type(values) is ndarray or type(values) is list or type(values) is tuple:
        return concatenate([a, values])
    z = array(values)
    if type(z) is not _Zerod:
        raise _NIE("listnp: append of this value")
    return concatenate([a, _wrap([z._v], z._t)])


def flatnonzero(a: object) -> ndarray:
    arr = _arr1(a)
    if arr._t.kind not in "fiubc":
        raise _NIE(f"listnp: nonzero of {arr._t}")
    return _wrap(list(_compress(range(len(arr._d)), arr._d)), I64)


def nonzero(a: object) -> tuple[ndarray]:
    return (flatnonzero(a),)


def count_nonzero(a: object) -> int:
    arr = _arr1(a)
    if arr._t.kind not in "fiubc":
        raise _NIE(f"listnp: count_nonzero of {arr._t}")
    return sum(map(_pybool, arr._d))


def _side(x: object, n: int) -> tuple[list[Any] | None, Any, dtype | None, str]:
    """An operand of where/choose: (elements or None, scalar, strong dtype or None, weak kind)."""
    if type(x) is ndarray:
        arr: ndarray = x
        if len(arr._d) == n:
            return arr._d, None, arr._t, ""
        if len(arr._d) == 1:
            return None, arr._d[0], arr._t, ""
        raise ValueError(
            f"operands could not be broadcast together with shapes ({n},) ({len(arr._d)},)"
        )
    if type(x) is list or type(x) is tuple:
        return _side(_arr1(x), n)
    if type(x) is _Zerod:
        z: _Zerod = x
        return None, z._v, z._t, ""
    kind = _weak_kind(x)
    if not kind or kind == "U":
        raise _NIE(f"listnp: where/choose of {type(x).__name__}")
    return None, _plain(x, kind), None, kind


def _common(sides: list[tuple[list[Any] | None, Any, dtype | None, str]]) -> dtype:
    strong = [s[2] for s in sides if s[2] is not None]
    weak = [(s[3], s[1]) for s in sides if s[2] is None]
    if strong:
        t = _reduce(_promote, strong)
        for kind, value in weak:
            t = _weak_promote(t, kind, value)
        return t
    if not weak:
        return F64
    out = _weak_pair(weak[0][0], weak[0][0])
    for kind, _ in weak[1:]:
        out = _weak_pair(out.kind, kind)
    return out


def where(condition: object, x: object = None, y: object = None) -> Any:
    cond = _arr1(condition)
    if x is None and y is None:
        return nonzero(cond)
    if x is None or y is None:
        raise ValueError("either both or neither of x and y should be given")
    if cond._t.kind not in "fiubc":
        raise _NIE(f"listnp: where() of a {cond._t} condition")
    cd = cond._d if cond._t is BOOL else [_pybool(c) for c in cond._d]
    n = len(cd)
    if n == 1 and any(type(v) is ndarray and len(v._d) != 1 for v in (x, y)):
        raise _NIE("listnp: where() broadcasting a length-1 condition")
    sx = _side(x, n)
    sy = _side(y, n)
    t = _common([sx, sy])
    xd, xs = sx[0], sx[1]
    yd, ys = sy[0], sy[1]
    if xd is not None:
        xd = _cast(xd, sx[2], t)  # type: ignore[arg-type]
    else:
        xs = _cast([xs], sx[2] or _DEFAULT_OF_KIND[sx[3]], t)[0] if sx[2] else _scalar_cast(xs, t)
    if yd is not None:
        yd = _cast(yd, sy[2], t)  # type: ignore[arg-type]
    else:
        ys = _cast([ys], sy[2], t)[0] if sy[2] else _scalar_cast(ys, t)
    if xd is not None and yd is not None:
        out = [u if c else v for c, u, v in zip(cd, xd, yd, strict=True)]
    elif xd is not None:
        out = [u if c else ys for c, u in zip(cd, xd, strict=True)]
    elif yd is not None:
        out = [xs if c else v for c, v in zip(cd, yd, strict=True)]
    else:
        out = [xs if c else ys for c in cd]
    return _wrap(out, t)


def _scalar_cast(value: object, t: dtype) -> Any:
    """A weak Python scalar converted to dtype `t` (checked in range by the promotion)."""
    return _cast_scalar(t, value)


def choose(a: object, choices: Sequence[object], **kwargs: object) -> ndarray:
    if kwargs:
        raise _NIE("listnp: choose() arguments")
    idx = _arr1(a)
    if idx._t is BOOL:
        idx = _wrap(list(map(int, idx._d)), I64)
    if idx._t.kind not in "iu":
        raise TypeError("Cannot cast array data from dtype to int64 according to the rule 'safe'")
    n = len(idx._d)
    sides = [_side(c, n) for c in choices]
    if any(s[2] is None for s in sides) and any(s[2] is not None for s in sides):
        raise _NIE("listnp: choose() mixing arrays and Python scalars")
    t = _common(sides)
    cols: list[Any] = []
    for d, s, st, _ in sides:
        if d is not None:
            cols.append(_cast(d, st, t))  # type: ignore[arg-type]
        else:
            cols.append(_cast([s], st, t)[0] if st is not None else _scalar_cast(s, t))
    k = len(cols)
    if idx._d and (min(idx._d) < 0 or max(idx._d) >= k):
        raise ValueError("invalid entry in choice array")
    out = [cols[j][i] if type(cols[j]) is list else cols[j] for i, j in enumerate(idx._d)]
    return _wrap(out, t)


def diff(
    a: object, n: int = 1, axis: int = -1, prepend: object = None, append: object = None
) -> ndarray:
    if n != 1 or axis not in (-1, 0):
        raise _NIE("listnp: diff() arguments")
    arr = _arr1(a)
    if prepend is not None or append is not None:
        parts: list[object] = [arr]
        if prepend is not None:
            parts.insert(0, _edge(prepend))
        if append is not None:
            parts.append(_edge(append))
        arr = concatenate(parts)
    d = arr._d
    t = arr._t
    k = t.kind
    if k == "b":
        return _wrap(list(map(_ne, d[1:], d[:-1])), t)
    if k == "f":
        return _wrap(list(map(_sub, d[1:], d[:-1])), t)
    if k == "i" or k == "u":
        return _wrap(_check_int_range(list(map(_sub, d[1:], d[:-1])), t), t)
    raise _NIE(f"listnp: diff of {t}")


def _edge(value: object) -> ndarray:
    if type(value) is ndarray:
        return value
    z = array(value)
    if type(z) is _Zerod:
        return _wrap([z._v], z._t)
    return z  # type: ignore[no-any-return]


def repeat(a: object, repeats: object, axis: object = None) -> ndarray:
    if axis not in (None, 0):
        raise _NIE("listnp: repeat(axis)")
    arr = _arr1(a) if type(a) is not _Zerod and not _weak_kind(a) else _edge(a)
    d = arr._d
    if type(repeats) is int:
        if repeats < 0:
            raise ValueError("negative dimensions are not allowed")
        return _wrap(list(_chain.from_iterable(_repeat(x, repeats) for x in d)), arr._t)
    reps = _arr1(repeats)
    if reps._t.kind not in "iub" or reps._t is U64:
        raise TypeError(
            "Cannot cast array data from dtype('float64') to dtype('int64') according to the rule 'safe'"
        )
    rd = reps._d
    if len(rd) == 1:
        return repeat(arr, int(rd[0]))
    if len(rd) != len(d):
        raise ValueError(
            f"operands could not be broadcast together with shape ({len(d)},) ({len(rd)},)"
        )
    if rd and min(rd) < 0:
        raise ValueError("repeats may not contain negative values.")
    return _wrap(list(_chain.from_iterable(map(_repeat, d, rd))), arr._t)


class _Stacked:
    """A 2-D array of columns (np.stack(columns, axis=1)): len, astype, [:, j], tolist."""

    __slots__ = ("_cols", "_t")

    def __init__(self, cols: list[list[Any]], t: dtype) -> None:
        self._cols = cols
        self._t = t

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise _NIE(f"listnp: 2-D array .{name}")

    @property
    def dtype(self) -> dtype:
        return self._t

    @property
    def ndim(self) -> int:
        return 2

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self._cols[0]), len(self._cols))

    @property
    def size(self) -> int:
        return len(self._cols[0]) * len(self._cols)

    def __len__(self) -> int:
        return len(self._cols[0])

    def astype(self, dtype: object, copy: bool = True) -> _Stacked:
        t = _dtype_of(dtype)
        cols = [list(_cast(c, self._t, t)) for c in self._cols]
        return _Stacked(cols, t)

    def tolist(self) -> list[list[Any]]:
        return [list(row) for row in zip(*self._cols, strict=True)]

    def __getitem__(self, key: object) -> Any:
        if type(key) is tuple and len(key) == 2 and key[0] == slice(None) and type(key[1]) is int:
            out = _wrap(list(self._cols[key[1]]), self._t)
            _ext(out).ro = 2  # a view in numpy: writing into it would write into this array
            return out
        raise _NIE(f"listnp: 2-D index {key!r}")

    def __iter__(self) -> Any:
        raise _NIE("listnp: iterating a 2-D array")


def stack(arrays: Sequence[object], axis: int = 0) -> _Stacked:
    if axis not in (1, -1):
        raise _NIE("listnp: stack() other than axis=1")
    arrs = [_arr1(a) for a in arrays]
    if not arrs:
        raise ValueError("need at least one array to stack")
    n = len(arrs[0]._d)
    if any(len(a._d) != n for a in arrs):
        raise ValueError("all input arrays must have the same shape")
    t = _reduce(_promote, [a._t for a in arrs])
    return _Stacked([list(_cast(a._d, a._t, t)) for a in arrs], t)


def broadcast_to(obj: object, shape: object) -> ndarray:
    n = _size(shape)
    if type(obj) is ndarray:
        arr: ndarray = obj
        if len(arr._d) == n:
            out = _wrap(list(arr._d), arr._t)
        elif len(arr._d) == 1:
            out = _wrap(arr._d * n, arr._t)
        else:
            raise ValueError(
                f"operands could not be broadcast together with remapped shapes [original->"
                f"remapped]: ({len(arr._d)},)  and requested shape ({n},)"
            )
    else:
        z = array(obj)
        if type(z) is not _Zerod:
            return broadcast_to(z, shape)
        out = _wrap([z._v] * n, z._t)
    _ext(out).ro = 1
    return out
