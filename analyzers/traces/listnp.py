"""A pure-Python stand-in for the part of numpy the trace engine uses (issue 19: a numpy-free
engine for small traces).

Why: `python -c 'import numpy'` alone costs 75-100 ms, more than the whole budget of
`fleetscope trace analyze` on a tiny trace (a few hundred events). For such traces the same
analysis code runs with `np` bound to this module: 1-D arrays backed by Python lists, importing
nothing but the standard library (well under 2 ms to import).

What it must never do:
- import numpy (not even lazily: a run that imports numpy has lost the race);
- be used for big traces: every operation is a Python loop over the elements, ~30-100 ns an
  element where numpy takes ~1; it pays off below a few thousand rows (the caller decides);
- return a value numpy would not. Every function gives numpy's (2.x) exact value and dtype, bit
  for bit (pairwise float summation, round-half-even rounding, NaN propagation, signed zeros,
  numpy's promotion rules) or raises `NotImplementedError`. The caller then runs the same code
  with real numpy, so raising on anything unusual (an integer overflow numpy would wrap, an
  order of equal keys an unstable sort leaves unspecified, a 2-D array, a rare dtype) is always
  SAFE; returning a different value is NEVER acceptable. Where numpy itself raises (a bad
  broadcast, an index out of bounds, `int(None)` in an int64 column), this module raises the same
  exception class.

Known, deliberate differences (the call sites must not depend on them):
- Indexing one element, a reduction (`sum`, `max`, ...), iteration and `item()` return plain
  Python `float` / `int` / `bool` where numpy returns numpy scalars: Python's scalar semantics
  then apply (`x / 0.0` raises ZeroDivisionError, `~True == -2`, `round()` is Python's, int
  arithmetic never wraps). Values are identical.
- `isinstance(x, np.generic)` is never true; `np.float64(x)` etc. return plain Python scalars.
- NaN payloads and the sign bit of NaN are not tracked (they never reach JSON).
- numpy's unstable sorts (`argsort` with the default kind) order equal keys in an unspecified
  (SIMD, machine-dependent) way: see `tie_order`.

Views: basic slices (`a[1:]`, `a[::-1]`), `ravel()`, `.real` / `.imag` are views as in numpy:
writing into one writes into its base (so `np.not_equal(x[1:], x[:-1], out=keep[1:])` works),
and writing into a base refreshes its live views. Arrays from `frombuffer` of a writable buffer
share memory with it in numpy: listnp copies, so writing into them raises NotImplementedError.

What raises NotImplementedError (numpy's answer is machine-dependent, wraps, or is not used):
integer results outside their dtype (numpy wraps), float->int casts of NaN/inf/out-of-range
values, integer or float floor division/remainder by zero, `**` other than `** 2`; a tie of
+0.0 and -0.0 in maximum/minimum/max/min/clip/accumulate/reduceat and in the default (unstable)
np.sort / np.unique (which zero comes out depends on numpy's SIMD path); the default argsort's
order of equal keys (`tie_order`, TieOrderUnknown); clip with min > max or a NaN bound;
searchsorted in an array that is not sorted; 2-D arrays other than np.stack(..., axis=1)'s
columns; 0-d arrays beyond np.asarray(scalar) fed to broadcast_to; dtypes other than float64,
int8-64, uint8-64, bool, complex128 (max/accumulate/real/imag only), object and str (float16/32
results: sqrt of small ints); a boolean index broadcast along a length-1 axis; every numpy
name this module does not define (module `__getattr__`).
"""

from __future__ import annotations

import math
import operator
from _weakref import ref as _weakref
from functools import reduce as _reduce
from itertools import accumulate as _accumulate
from itertools import chain as _chain
from itertools import compress as _compress
from itertools import islice as _islice
from itertools import repeat as _repeat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any

__all__ = [
    "TieOrderUnknown",
    "append",
    "arange",
    "argsort",
    "array",
    "asarray",
    "bincount",
    "broadcast_to",
    "ceil",
    "choose",
    "clip",
    "concatenate",
    "cumsum",
    "diff",
    "dtype",
    "empty",
    "flatnonzero",
    "floor",
    "frombuffer",
    "fromiter",
    "full",
    "isin",
    "isnan",
    "lexsort",
    "linspace",
    "maximum",
    "minimum",
    "nansum",
    "ndarray",
    "ones",
    "repeat",
    "round",
    "searchsorted",
    "sort",
    "stack",
    "tie_order",
    "trunc",
    "unique",
    "where",
    "zeros",
]

nan = math.nan
inf = math.inf
pi = math.pi
e = math.e
newaxis = None

_add = operator.add
_sub = operator.sub
_mul = operator.mul
_lt = operator.lt
_le = operator.le
_gt = operator.gt
_ge = operator.ge
_eq = operator.eq
_ne = operator.ne
_and = operator.and_
_or = operator.or_
_xor = operator.xor
_copysign = math.copysign
_isnan = math.isnan
_floor = math.floor
_ceil = math.ceil
_trunc = math.trunc
_object_new = object.__new__
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_BUFSIZE = 8192  # numpy's default ufunc buffer: casted reductions are summed in such chunks
_NIE = NotImplementedError


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


# ---------------------------------------------------------------------------------------------
# dtypes and scalar types


class dtype:
    """numpy's dtype, for the dtypes listnp supports (one canonical instance each)."""

    __slots__ = ("_fmt", "_hi", "_lo", "char", "itemsize", "kind", "name", "type")
    name: str
    kind: str
    itemsize: int
    char: str
    type: type
    _fmt: str
    _lo: int
    _hi: int

    def __new__(cls, spec: object) -> dtype:
        return _dtype_of(spec)

    def __repr__(self) -> str:
        return f"dtype('{self.name if self.kind != 'U' else '<U' + str(self.itemsize // 4)}')"

    def __str__(self) -> str:
        return self.name if self.kind != "U" else "<U" + str(self.itemsize // 4)

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        try:
            return _dtype_of(other) is self
        except (TypeError, _NIE):
            return False

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.name)

    def __reduce__(self) -> tuple[object, ...]:
        return (_dtype_of, (self.name,))


def _mkdtype(name: str, kind: str, itemsize: int, char: str, fmt: str, bits: int = 0) -> dtype:
    t: dtype = _object_new(dtype)
    t.name, t.kind, t.itemsize, t.char, t._fmt = name, kind, itemsize, char, fmt
    if kind == "i":
        t._lo, t._hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    elif kind == "u":
        t._lo, t._hi = 0, (1 << bits) - 1
    else:
        t._lo = t._hi = 0
    return t


F64 = _mkdtype("float64", "f", 8, "d", "d")
I64 = _mkdtype("int64", "i", 8, "q", "q", 64)
I32 = _mkdtype("int32", "i", 4, "i", "i", 32)
I16 = _mkdtype("int16", "i", 2, "h", "h", 16)
I8 = _mkdtype("int8", "i", 1, "b", "b", 8)
U64 = _mkdtype("uint64", "u", 8, "Q", "Q", 64)
U32 = _mkdtype("uint32", "u", 4, "I", "I", 32)
U16 = _mkdtype("uint16", "u", 2, "H", "H", 16)
U8 = _mkdtype("uint8", "u", 1, "B", "B", 8)
BOOL = _mkdtype("bool", "b", 1, "?", "?")
OBJ = _mkdtype("object", "O", 8, "O", "")
C128 = _mkdtype("complex128", "c", 16, "D", "")
_INTS = (I8, I16, I32, I64)
_UINTS = (U8, U16, U32, U64)
_UNICODE: dict[int, dtype] = {}


def _unicode(width: int) -> dtype:
    t = _UNICODE.get(width)
    if t is None:
        t = _UNICODE[width] = _mkdtype("str", "U", 4 * width, "U", "")
    return t


class generic:
    """numpy's scalar base class. listnp never makes numpy scalars (element access gives plain
    Python scalars), so nothing is an instance; the subclasses are dtype arguments and
    constructors of plain Python scalars (`np.float64(x)` is `float(x)`)."""

    __slots__ = ()

    def __new__(cls, *args: object) -> Any:
        raise _NIE(f"listnp: numpy scalar type {cls.__name__}")


class number(generic):
    __slots__ = ()


class integer(number):
    __slots__ = ()


class signedinteger(integer):
    __slots__ = ()


class unsignedinteger(integer):
    __slots__ = ()


class inexact(number):
    __slots__ = ()


class floating(inexact):
    __slots__ = ()


class complexfloating(inexact):
    __slots__ = ()


def _int_scalar(t: dtype, value: object) -> int:
    tv = type(value)
    number: int
    if tv is int or tv is bool:
        number = int(value)  # type: ignore[call-overload]
    elif tv is float:
        if not math.isfinite(value):  # type: ignore[arg-type]
            raise _NIE(f"listnp: {t.name}({value!r})")
        number = int(value)  # type: ignore[call-overload]
    else:
        raise _NIE(f"listnp: {t.name}() of {tv.__name__}")
    if not t._lo <= number <= t._hi:
        raise _NIE(f"listnp: {number} out of bounds for {t.name}")
    return number


class float64(floating):
    __slots__ = ()

    def __new__(cls, value: object = 0.0) -> float:  # type: ignore[misc]
        tv = type(value)
        if tv is float or tv is int or tv is bool:
            return float(value)  # type: ignore[arg-type]
        raise _NIE(f"listnp: float64() of {tv.__name__}")


class int64(signedinteger):
    __slots__ = ()

    def __new__(cls, value: object = 0) -> int:  # type: ignore[misc]
        return _int_scalar(I64, value)


class int32(signedinteger):
    __slots__ = ()

    def __new__(cls, value: object = 0) -> int:  # type: ignore[misc]
        return _int_scalar(I32, value)


class int16(signedinteger):
    __slots__ = ()

    def __new__(cls, value: object = 0) -> int:  # type: ignore[misc]
        return _int_scalar(I16, value)


class int8(signedinteger):
    __slots__ = ()

    def __new__(cls, value: object = 0) -> int:  # type: ignore[misc]
        return _int_scalar(I8, value)


class uint64(unsignedinteger):
    __slots__ = ()

    def __new__(cls, value: object = 0) -> int:  # type: ignore[misc]
        return _int_scalar(U64, value)


class uint32(unsignedinteger):
    __slots__ = ()

    def __new__(cls, value: object = 0) -> int:  # type: ignore[misc]
        return _int_scalar(U32, value)


class uint16(unsignedinteger):
    __slots__ = ()

    def __new__(cls, value: object = 0) -> int:  # type: ignore[misc]
        return _int_scalar(U16, value)


class uint8(unsignedinteger):
    __slots__ = ()

    def __new__(cls, value: object = 0) -> int:  # type: ignore[misc]
        return _int_scalar(U8, value)


class bool_(generic):
    __slots__ = ()

    def __new__(cls, value: object = False) -> bool:  # type: ignore[misc]
        tv = type(value)
        if tv is bool or tv is int or tv is float:
            return bool(value)
        raise _NIE(f"listnp: bool_() of {tv.__name__}")


class complex128(complexfloating):
    __slots__ = ()

    def __new__(cls, value: object = 0j) -> complex:  # type: ignore[misc]
        if isinstance(value, int | float | complex):
            return complex(value)
        raise _NIE(f"listnp: complex128() of {type(value).__name__}")


class object_(generic):
    __slots__ = ()


class str_(generic):
    __slots__ = ()


intp = int64
int_ = int64
double = float64
float_ = float64
cdouble = complex128
_pybool = bool

for _t, _s in (
    (F64, float64), (I64, int64), (I32, int32), (I16, int16), (I8, int8), (U64, uint64),
    (U32, uint32), (U16, uint16), (U8, uint8), (BOOL, bool_), (OBJ, object_), (C128, complex128),
):  # fmt: skip
    _t.type = _s

_DTYPES: dict[object, dtype] = {
    None: F64,
    float: F64, float64: F64, "float64": F64, "f8": F64, "d": F64, "double": F64, "float": F64,
    int: I64, int64: I64, "int64": I64, "i8": I64, "q": I64, "intp": I64, "int": I64, "l": I64,
    int32: I32, "int32": I32, "i4": I32, "i": I32,
    int16: I16, "int16": I16, "i2": I16, "h": I16,
    int8: I8, "int8": I8, "i1": I8, "b": I8,
    uint64: U64, "uint64": U64, "u8": U64, "Q": U64, "uintp": U64,
    uint32: U32, "uint32": U32, "u4": U32, "I": U32,
    uint16: U16, "uint16": U16, "u2": U16, "H": U16,
    uint8: U8, "uint8": U8, "u1": U8, "B": U8,
    _pybool: BOOL, bool_: BOOL, "bool": BOOL, "?": BOOL, "b1": BOOL,
    object: OBJ, object_: OBJ, "object": OBJ, "O": OBJ,
    complex: C128, complex128: C128, "complex128": C128, "c16": C128, "D": C128, "complex": C128,
}  # fmt: skip


def _dtype_of(spec: object) -> dtype:
    """The dtype a numpy dtype argument names (NotImplementedError for one listnp lacks)."""
    if type(spec) is dtype:
        return spec
    try:
        t = _DTYPES.get(spec)
    except TypeError:  # unhashable
        t = None
    if t is None:
        raise _NIE(f"listnp: dtype {spec!r}")
    return t


# ---------------------------------------------------------------------------------------------
# promotion


def _promote(a: dtype, b: dtype) -> dtype:
    """numpy's `result_type` of two array dtypes (no Python scalars involved)."""
    if a is b:
        return a
    key = (a, b)
    t = _PROMOTED.get(key)
    if t is None:
        t = _PROMOTED[key] = _promote_slow(a, b)
    return t


def _promote_slow(a: dtype, b: dtype) -> dtype:
    ka, kb = a.kind, b.kind
    if ka == "U" and kb == "U":
        return a if a.itemsize >= b.itemsize else b
    if ka == "U" or kb == "U":
        raise _NIE(f"listnp: no common dtype of {a} and {b}")
    if ka == "O" or kb == "O":
        return OBJ
    if ka == "c" or kb == "c":
        return C128
    if ka == "f" or kb == "f":
        return F64
    if ka == "b":
        return b
    if kb == "b":
        return a
    if ka == kb:  # both signed or both unsigned
        return a if a.itemsize >= b.itemsize else b
    s, u = (a, b) if ka == "i" else (b, a)
    if s.itemsize > u.itemsize:
        return s
    if u.itemsize < 8:
        return {1: I16, 2: I32, 4: I64}[u.itemsize]
    return F64


_PROMOTED: dict[tuple[dtype, dtype], dtype] = {}
_WEAK_KIND = {float: "f", int: "i", _pybool: "b", complex: "c", str: "U"}
_DEFAULT_OF_KIND = {"b": BOOL, "i": I64, "f": F64, "c": C128}
_KIND_ORDER = {"b": 0, "i": 1, "u": 1, "f": 2, "c": 3}
_CAST_ORDER = {"b": 0, "u": 1, "i": 2, "f": 3, "c": 4, "O": 5}


def _same_kind(src: dtype, dst: dtype) -> bool:
    """numpy's can_cast(src, dst, "same_kind") for listnp's dtypes."""
    if src is dst:
        return True
    return _CAST_ORDER.get(src.kind, 9) <= _CAST_ORDER.get(dst.kind, -1)


def _weak_kind(value: object) -> str:
    """Kind of a Python scalar under NEP 50 ('' when not a numeric/str scalar)."""
    k = _WEAK_KIND.get(type(value))
    if k is not None:
        return k
    if isinstance(value, int):  # IntEnum and other int subclasses (bool is in the table)
        return "i"
    if isinstance(value, float):
        return "f"
    return ""


def _plain(value: object, kind: str) -> Any:
    """A weak scalar as the plain Python type of its kind (IntEnum -> int)."""
    tv = type(value)
    if kind == "i" and tv is not int:
        return int(value)  # type: ignore[call-overload]
    if kind == "f" and tv is not float:
        return float(value)  # type: ignore[arg-type]
    return value


def _weak_promote(t: dtype, kind: str, value: object) -> dtype:
    """numpy 2's result dtype of an array of dtype `t` with a Python scalar of `kind`."""
    k = t.kind
    if kind == "b":
        if k == "U":
            raise _NIE("listnp: str array with a bool")
        return t
    if kind == "i":
        if k == "b":
            return I64
        if k == "i" or k == "u":
            if not t._lo <= value <= t._hi:  # type: ignore[operator]
                raise _NIE(f"listnp: Python integer {value} out of bounds for {t.name}")
            return t
        if k == "U":
            raise _NIE("listnp: str array with an int")
        return t
    if kind == "f":
        if k == "b" or k == "i" or k == "u":
            return F64
        if k == "U":
            raise _NIE("listnp: str array with a float")
        return t
    if kind == "c":
        if k == "O":
            return OBJ
        if k == "U":
            raise _NIE("listnp: str array with a complex")
        return C128
    if kind == "U":
        if k == "U" or k == "O":
            return t
        raise _NIE("listnp: numeric array with a str")
    if k == "O":
        return OBJ
    raise _NIE(f"listnp: array of {t.name} with {type(value).__name__}")


def _weak_pair(k1: str, k2: str) -> dtype:
    """The dtype of two Python scalars combined (np.where(c, 1, 2.0): float64)."""
    if not k1 or not k2 or k1 == "U" or k2 == "U":
        raise _NIE("listnp: non-numeric scalars")
    return _DEFAULT_OF_KIND[k1 if _KIND_ORDER[k1] >= _KIND_ORDER[k2] else k2]


# ---------------------------------------------------------------------------------------------
# casting element lists


def _cast(d: list[Any], src: dtype, dst: dtype) -> list[Any]:
    """The elements `d` (of dtype `src`) as dtype `dst` ("unsafe" casting, as astype and
    assignment do); may return `d` itself when nothing changes (callers copy when they keep it).
    A cast numpy would do by wrapping or to an undefined value raises NotImplementedError."""
    if src is dst:
        return d
    sk, dk = src.kind, dst.kind
    if dk == "f":
        if sk == "f":
            return d
        if sk in "iub":
            return list(map(float, d))
        raise _NIE(f"listnp: cast {src} -> {dst}")
    if dk == "i" or dk == "u":
        if sk == "i" or sk == "u":
            if src.itemsize < dst.itemsize and (sk == dk or sk == "u"):
                return d
            if d and (min(d) < dst._lo or max(d) > dst._hi):
                raise _NIE(f"listnp: {src} -> {dst} cast would wrap")
            return d
        if sk == "b":
            return list(map(int, d))
        if sk == "f":
            try:
                out = list(map(int, d))  # truncation toward zero, as C casts
            except (ValueError, OverflowError):
                raise _NIE(f"listnp: cast of NaN/inf to {dst}") from None
            if out and (min(out) < dst._lo or max(out) > dst._hi):
                raise _NIE(f"listnp: float -> {dst} cast out of range")
            return out
        raise _NIE(f"listnp: cast {src} -> {dst}")
    if dk == "b":
        if sk == "b":
            return d
        if sk in "iuf":
            return [x != 0 for x in d]
        raise _NIE(f"listnp: cast {src} -> {dst}")
    if dk == "O":
        if sk in "fiubO":
            return d
        raise _NIE(f"listnp: cast {src} -> {dst}")
    if dk == "c":
        if sk in "fiub":
            return list(map(complex, d))
        raise _NIE(f"listnp: cast {src} -> {dst}")
    if dk == "U" and sk == "U":
        width = dst.itemsize // 4
        if src.itemsize <= dst.itemsize:
            return d
        return [s[:width].rstrip("\x00") for s in d]
    raise _NIE(f"listnp: cast {src} -> {dst}")


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


def _check_int_range(d: list[int], t: dtype) -> list[int]:
    """`d` unless a value is out of `t`'s range (numpy would wrap: NotImplementedError)."""
    if d and (max(d) > t._hi or min(d) < t._lo):
        raise _NIE(f"listnp: {t} overflow (numpy would wrap around)")
    return d


# ---------------------------------------------------------------------------------------------
# the array


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


class ndarray:
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

    def __contains__(self, value: object) -> bool:
        return _compare(self, value, _EQ, False).any()

    def __copy__(self) -> ndarray:
        return self.copy()

    def __deepcopy__(self, memo: object) -> ndarray:
        if self._t is OBJ:
            raise _NIE("listnp: deepcopy of an object array")
        return self.copy()

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

    def astype(self, dtype: object, copy: bool = True, **kwargs: object) -> ndarray:
        if kwargs:
            raise _NIE(f"listnp: astype({', '.join(kwargs)}=...)")
        t = _dtype_of(dtype)
        if t is self._t:
            return _wrap(list(self._d), t) if copy else self
        d = _cast(self._d, self._t, t)
        return _wrap(list(d) if d is self._d else d, t)

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


def _inplace(a: ndarray, result: ndarray) -> ndarray:
    """`a op= b`: the result written into `a` (numpy's same_kind casting)."""
    t = a._t
    rt = result._t
    if rt is not t:
        if not _same_kind(rt, t):
            raise TypeError(
                f"Cannot cast ufunc output from dtype('{rt}') to dtype('{t}') with casting rule 'same_kind'"
            )
        result = _wrap(_cast(result._d, rt, t), t)
    _set_data(a, result._d)
    return a


# ---------------------------------------------------------------------------------------------
# elementwise operations


_ADD, _SUB, _MUL, _TDIV, _FDIV, _MOD, _AND, _OR, _XOR = range(9)
_LT, _LE, _GT, _GE, _EQ, _NE = range(10, 16)
_MAX, _MIN = 20, 21
_ARITH_FN = (_add, _sub, _mul, operator.truediv, operator.floordiv, operator.mod, _and, _or, _xor)
_ARITH_NAME = ("add", "subtract", "multiply", "divide", "floor_divide", "remainder",
               "bitwise_and", "bitwise_or", "bitwise_xor")  # fmt: skip
_CMP_FN = {_LT: _lt, _LE: _le, _GT: _gt, _GE: _ge, _EQ: _eq, _NE: _ne}
_SWAP = {_LT: _GT, _LE: _GE, _GT: _LT, _GE: _LE, _EQ: _EQ, _NE: _NE}


def _other(a: ndarray, b: object) -> tuple[list[Any] | None, Any, dtype]:
    """(other's elements or None, other's scalar value, the compute dtype) of `a op b`.

    Broadcasting: equal lengths, a scalar, or a length-1 array (a strong scalar)."""
    ta = a._t
    tb = type(b)
    if tb is ndarray:
        arr: ndarray = b  # type: ignore[assignment]
        bd = arr._d
        t = _promote(ta, arr._t)
        if len(bd) == len(a._d):
            return bd, None, t
        if len(bd) == 1:
            return None, bd[0], t
        raise ValueError(
            f"operands could not be broadcast together with shapes ({len(a._d)},) ({len(bd)},)"
        )
    if tb is float:
        k = ta.kind
        return None, b, (F64 if k in "biuf" else _weak_promote(ta, "f", b))
    kind = _weak_kind(b)
    if kind:
        value = _plain(b, kind)
        t = _weak_promote(ta, kind, value)
        if t.kind == "U":
            value = value.rstrip("\x00")  # numpy's str dtype drops trailing NULs
        return None, value, t
    if tb is _Zerod:
        z: _Zerod = b  # type: ignore[assignment]
        return None, z._v, _promote(ta, z._t)
    if ta is OBJ and not isinstance(b, list | tuple | dict | set):
        return None, b, OBJ
    raise _NIE(f"listnp: array with {tb.__name__}")


def _as(d: list[Any], src: dtype, dst: dtype) -> list[Any]:
    """Elements converted for a computation in `dst` (ints -> floats before a comparison, so
    they compare as numpy's cast values, not exactly as Python's int/float comparison)."""
    if src is dst or src.kind == dst.kind:
        return d
    return _cast(d, src, dst)


def _scalar_as(value: Any, dst: dtype) -> Any:
    k = dst.kind
    tv = type(value)
    if k == "f" and tv is not float:
        return float(value)
    if k == "c" and tv is not complex:
        return complex(value)
    if (k == "i" or k == "u") and tv is _pybool:
        return int(value)
    return value


def _arith(a: ndarray, b: Any, op: int, refl: bool) -> ndarray:
    if len(a._d) == 1 and type(b) is ndarray and len(b._d) != 1:
        return _arith(b, a, op, not refl)  # a length-1 array broadcast: a strong scalar
    bd, bs, t = _other(a, b)
    ad = a._d
    ta = a._t
    k = t.kind
    if op == _TDIV:
        if k in "biu":
            t = F64
            k = "f"
        elif k != "f" and k != "c":
            raise _NIE(f"listnp: division of {t} arrays")
        ad = _as(ad, ta, t)
        if bd is not None:
            bd = _as(bd, b._t, t)
        else:
            bs = _scalar_as(bs, t)
        return _wrap(_divide(ad, bd, bs, refl, k == "c"), t)
    if k == "b":
        if op == _ADD:
            op = _OR
        elif op == _MUL:
            op = _AND
        elif op == _SUB:
            raise TypeError(
                "numpy boolean subtract, the `-` operator, is not supported, use the bitwise_xor, "
                "the `^` operator, or the logical_xor function instead."
            )
        elif op >= _AND:
            pass
        else:
            raise _NIE(f"listnp: {_ARITH_NAME[op]} of bool arrays")
    elif k == "f":
        if op >= _AND:
            raise TypeError(f"ufunc '{_ARITH_NAME[op]}' not supported for the input types")
        if ta.kind != "f" and (b._t.kind != "f" if bd is not None else type(bs) is not float):
            # float64 from two integer operands (uint64 with int64): numpy casts both first
            ad = _as(ad, ta, t)
            if bd is not None:
                bd = _as(bd, b._t, t)
            else:
                bs = float(bs)
        if op in (_FDIV, _MOD):
            ad = _as(ad, ta, t)
            if bd is not None:
                bd = _as(bd, b._t, t)
                if 0.0 in (ad if refl else bd):
                    raise _NIE("listnp: float floor division/remainder by zero")
            else:
                bs = float(bs)
                if (0.0 in ad) if refl else (bs == 0.0):
                    raise _NIE("listnp: float floor division/remainder by zero")
    elif k == "i" or k == "u":
        if (op in (_FDIV, _MOD)) and (
            (0 in ad) if refl else (0 in bd if bd is not None else bs == 0)
        ):
            raise _NIE("listnp: integer division by zero (numpy gives 0)")
        if bd is not None and ta.kind != b._t.kind:
            ad = _as(ad, ta, t)
            bd = _as(bd, b._t, t)
        elif bs is not None:
            bs = _scalar_as(bs, t)
    elif k == "O":
        if op > _MUL:
            raise _NIE(f"listnp: {_ARITH_NAME[op]} of object arrays")
    else:
        raise _NIE(f"listnp: {_ARITH_NAME[op]} of {t} arrays")
    fn = _ARITH_FN[op]
    if bd is not None:
        out = list(map(fn, bd, ad)) if refl else list(map(fn, ad, bd))
    elif op == _ADD:
        out = [bs + x for x in ad] if refl else [x + bs for x in ad]
    elif op == _SUB:
        out = [bs - x for x in ad] if refl else [x - bs for x in ad]
    elif op == _MUL:
        out = [bs * x for x in ad] if refl else [x * bs for x in ad]
    elif refl:
        out = list(map(fn, _repeat(bs, len(ad)), ad))
    else:
        out = list(map(fn, ad, _repeat(bs, len(ad))))
    if k == "i" or k == "u":
        _check_int_range(out, t)
    return _wrap(out, t)


def _fdiv(x: float, y: float) -> float:
    """IEEE division (numpy's): x/0 is +-inf, 0/0 and nan/0 are nan."""
    if y == 0.0:
        if x != x or x == 0.0:
            return math.nan
        return _copysign(math.inf, x) * _copysign(1.0, y)
    return x / y


def _divide(ad: list[Any], bd: list[Any] | None, bs: Any, refl: bool, cplx: bool) -> list[Any]:
    try:
        if bd is not None:
            return (
                list(map(operator.truediv, bd, ad)) if refl else list(map(operator.truediv, ad, bd))
            )
        if refl:
            return [bs / x for x in ad]
        return [x / bs for x in ad]
    except ZeroDivisionError:
        if cplx:
            raise _NIE("listnp: complex division by zero") from None
    if bd is not None:
        return list(map(_fdiv, bd, ad)) if refl else list(map(_fdiv, ad, bd))
    if refl:
        return [_fdiv(bs, x) for x in ad]
    return [_fdiv(x, bs) for x in ad]


def _power(a: ndarray, b: object) -> ndarray:
    k = a._t.kind
    if type(b) in (int, float) and b == 2 and k in "fi":
        t = a._t if (k == "f" or type(b) is int) else F64
        d = _as(a._d, a._t, t)
        out = [x * x for x in d]
        return _wrap(_check_int_range(out, t) if t.kind == "i" else out, t)
    raise _NIE("listnp: ** other than array ** 2")


def _compare(a: ndarray, b: Any, op: int, refl: bool) -> ndarray:
    if len(a._d) == 1 and type(b) is ndarray and len(b._d) != 1:
        return _compare(b, a, op, not refl)  # a length-1 array broadcast: a strong scalar
    ad = a._d
    bs: Any
    if a._t.kind in "iub":
        # integers compare exactly in numpy 2 (uint64 with int64, an int8 with 300): Python's
        # comparisons of ints
        tb = type(b)
        if tb is int or (tb is not _pybool and tb is not float and isinstance(b, int)):
            bd, bs, t = None, int(b), I64
        else:
            bd, bs, t = _other(a, b)
            if t is F64 and (bd is not None or tb is _Zerod or tb is ndarray) and _int_kinds(b):
                t = I64
    else:
        bd, bs, t = _other(a, b)
    k = t.kind
    if k == "f":
        ta = a._t
        if ta is not t:
            ad = _cast(ad, ta, t)
        if bd is not None:
            if b._t is not t:
                bd = _cast(bd, b._t, t)
        elif type(bs) is not float:
            bs = float(bs)
    elif k == "i" or k == "u" or k == "b" or k == "U":
        pass  # Python's comparisons of ints, bools and strs are numpy's
    elif k == "O":
        fn = _CMP_FN[op]
        if bd is not None:
            raw = map(fn, bd, ad) if refl else map(fn, ad, bd)
        else:
            raw = map(fn, _repeat(bs), ad) if refl else map(fn, ad, _repeat(bs))
        return _wrap([x if type(x) is _pybool else _truth(x) for x in raw], BOOL)
    else:
        raise _NIE(f"listnp: comparison of {t} arrays")
    if refl:
        op = _SWAP[op]
    if bd is not None:
        return _wrap(list(map(_CMP_FN[op], ad, bd)), BOOL)
    if op == _LT:
        return _wrap([x < bs for x in ad], BOOL)
    if op == _LE:
        return _wrap([x <= bs for x in ad], BOOL)
    if op == _GT:
        return _wrap([x > bs for x in ad], BOOL)
    if op == _GE:
        return _wrap([x >= bs for x in ad], BOOL)
    if op == _EQ:
        return _wrap([x == bs for x in ad], BOOL)
    return _wrap([x != bs for x in ad], BOOL)


def _int_kinds(b: Any) -> bool:
    """Whether an array operand holds integers or bools (a uint64/int64 mix promotes to float64,
    yet numpy compares them exactly)."""
    kind: str = b._t.kind
    return kind in "iub"


def _truth(x: object) -> bool:
    if isinstance(x, ndarray):
        raise _NIE("listnp: object comparison giving arrays")
    return bool(x)


def _mixed_zero(xs: Iterable[float]) -> bool:
    """Whether the floats hold both +0.0 and -0.0."""
    signs = {_copysign(1.0, x) for x in xs if x == 0.0}
    return len(signs) == 2


def _has_nan(d: list[float]) -> bool:
    """Whether any element is NaN (the builtin sum is NaN then; an inf - inf is checked)."""
    s = sum(d)
    if s == s:
        return False
    return any(x != x for x in d)


def _minmax(a: object, b: object, is_max: bool) -> ndarray:
    """np.maximum / np.minimum: NaN propagates; which of two equal zeros of different sign comes
    out depends on numpy's SIMD path, so that case raises."""
    if type(a) is not ndarray:
        if type(b) is not ndarray:
            if _weak_kind(a) and _weak_kind(b):
                raise _NIE("listnp: maximum/minimum of two scalars")
            a = asarray(a)
        else:
            return _minmax_arr(b, a, is_max, True)
    return _minmax_arr(a, b, is_max, False)  # type: ignore[arg-type]


def _minmax_arr(a: ndarray, b: Any, is_max: bool, refl: bool) -> ndarray:
    if len(a._d) == 1 and type(b) is ndarray and len(b._d) != 1:
        return _minmax_arr(b, a, is_max, not refl)
    bd, bs, t = _other(a, b)
    k = t.kind
    ad = _as(a._d, a._t, t)
    if bd is not None:
        bd = _as(bd, b._t, t)
    else:
        bs = _scalar_as(bs, t)
    if k == "b":
        if bd is not None:
            out = list(map(_or if is_max else _and, ad, bd))
        else:
            out = [x or bs for x in ad] if is_max else [x and bs for x in ad]
        return _wrap(out, t)
    if k == "i" or k == "u":
        if bd is not None:
            out = (
                [x if x > y else y for x, y in zip(ad, bd, strict=False)]
                if is_max
                else [x if x < y else y for x, y in zip(ad, bd, strict=False)]
            )
        else:
            out = [x if x > bs else bs for x in ad] if is_max else [x if x < bs else bs for x in ad]
        return _wrap(out, t)
    if k != "f":
        raise _NIE(f"listnp: maximum/minimum of {t}")
    if bd is not None:
        if (
            0.0 in ad
            and 0.0 in bd
            and any(
                x == 0.0 and y == 0.0 and _copysign(1.0, x) != _copysign(1.0, y)
                for x, y in zip(ad, bd, strict=False)
            )
        ):
            raise _NIE("listnp: maximum/minimum of +0.0 and -0.0")
        if is_max:
            out = [x if x > y or x != x else y for x, y in zip(ad, bd, strict=False)]
        else:
            out = [x if x < y or x != x else y for x, y in zip(ad, bd, strict=False)]
        return _wrap(out, t)
    if (
        bs == 0.0
        and 0.0 in ad
        and any(x == 0.0 and _copysign(1.0, x) != _copysign(1.0, bs) for x in ad)
    ):
        raise _NIE("listnp: maximum/minimum of +0.0 and -0.0")
    if bs != bs:
        return _wrap([bs] * len(ad), t)
    if is_max:
        out = [x if x > bs or x != x else bs for x in ad]
    else:
        out = [x if x < bs or x != x else bs for x in ad]
    return _wrap(out, t)


# ---------------------------------------------------------------------------------------------
# reductions


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


# ---------------------------------------------------------------------------------------------
# construction


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


# ---------------------------------------------------------------------------------------------
# functions on arrays


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


# ---------------------------------------------------------------------------------------------
# sorting and searching


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
    result = list(tie_order(list(stable), groups))
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


def isin(
    element: object,
    test_elements: object,
    assume_unique: bool = False,
    invert: bool = False,
    *,
    kind: object = None,
) -> ndarray:
    arr = _arr1(element)
    test = _arr1(test_elements)
    t = _promote(arr._t, test._t)
    if t.kind not in "iubfU":
        raise _NIE(f"listnp: isin of {t}")
    if arr._t.kind in "iub" and test._t.kind in "iub":
        ad, td = arr._d, test._d  # compared exactly, as numpy's table method does
    else:
        ad = _as(arr._d, arr._t, t)
        td = _as(test._d, test._t, t)
    table = {x for x in td if x == x}  # NaN is in nothing
    out = [x in table and x == x for x in ad] if t.kind == "f" else [x in table for x in ad]
    if invert:
        out = [not x for x in out]
    return _wrap(out, BOOL)


def unique(
    ar: object,
    return_index: bool = False,
    return_inverse: bool = False,
    return_counts: bool = False,
    axis: object = None,
    *,
    equal_nan: bool = True,
    **kwargs: object,
) -> Any:
    """numpy's `_unique1d`: sorted distinct values (NaNs as one, last); the index of each
    value's first occurrence; the inverse; the counts."""
    if axis is not None or not equal_nan or kwargs:
        raise _NIE("listnp: unique() arguments")
    arr = _arr1(ar)
    d = arr._d
    t = arr._t
    if t.kind not in "iubfU":
        raise _NIE(f"listnp: unique of {t}")
    if t.kind in "iubU" and not (return_index or return_inverse or return_counts):
        return _wrap(sorted(set(d)), t)  # equal ints, bools and strs are indistinguishable
    n = len(d)
    order = _stable_order(d, t)
    aux = [d[i] for i in order]
    # mask: the first of each run of equal values (NaNs one run)
    if t.kind == "f":
        mask = (
            [True]
            + [(x != y) and (x == x or y == y) for x, y in zip(aux[1:], aux[:-1], strict=False)]
            if n
            else []
        )
    else:
        mask = [True, *list(map(_ne, aux[1:], aux[:-1]))] if n else []
    values = list(_compress(aux, mask))
    # which zero numpy keeps depends on its sort (or hash table) when the order is unstable
    if t.kind == "f" and not return_index and 0.0 in values and _mixed_zero(aux):
        raise _NIE("listnp: unique of +0.0 and -0.0")
    ret: list[Any] = [_wrap(values, t)]
    if return_index:
        ret.append(_wrap(list(_compress(order, mask)), I64))
    if return_inverse:
        imask = list(_accumulate(map(int, mask)))
        inv = [0] * n
        for pos, i in enumerate(order):
            inv[i] = imask[pos] - 1
        ret.append(_wrap(inv, I64))
    if return_counts:
        starts = list(_compress(range(n), mask))
        starts.append(n)
        ret.append(_wrap(list(map(_sub, starts[1:], starts[:-1])), I64))
    return ret[0] if len(ret) == 1 else tuple(ret)


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


# ---------------------------------------------------------------------------------------------
# ufuncs


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


# ---------------------------------------------------------------------------------------------
# typing stand-ins (numpy.typing): `npt.NDArray[np.float64]` must evaluate at import


class _Typing:
    """`numpy.typing`'s names as runtime placeholders: `listnp.typing.NDArray[listnp.float64]`."""

    NDArray: Any = ndarray
    ArrayLike: Any = object
    DTypeLike: Any = object


typing = _Typing()
NDArray = ndarray


# numpy's names that are Python builtins: served by __getattr__ (PEP 562), so that inside this
# module `max`, `round`, `bool`, ... stay the builtins
_SHADOWING: dict[str, object] = {
    "round": _np_round,
    "sum": _np_sum,
    "max": amax,
    "min": amin,
    "abs": absolute,
    "any": _np_any,
    "all": _np_all,
    "bool": bool_,
}


def __getattr__(name: str) -> Any:
    """numpy's names that shadow builtins; any numpy name listnp lacks raises
    NotImplementedError, so the caller falls back to numpy."""
    value = _SHADOWING.get(name)
    if value is not None:
        return value
    if name.startswith("__"):
        raise AttributeError(name)
    raise _NIE(f"listnp has no numpy.{name}")
