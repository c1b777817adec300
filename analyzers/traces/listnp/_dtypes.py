"""dtypes and numpy's scalar types: `dtype` (one canonical instance each: F64, I64, ...), the
scalar classes (`float64(x)` is `float(x)`, nothing is ever an instance) and `_dtype_of`, the dtype
a numpy dtype argument names. Also the few constants every listnp module shares."""

from __future__ import annotations

import math

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


_object_new = object.__new__
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_NIE = NotImplementedError


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
