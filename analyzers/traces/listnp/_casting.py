"""Promotion (numpy 2's result_type of two dtypes, NEP 50 weak Python scalars) and casting of
element lists and scalars between dtypes."""

from __future__ import annotations

from analyzers.traces.listnp._dtypes import (
    _NIE,
    BOOL,
    C128,
    F64,
    I16,
    I32,
    I64,
    OBJ,
    _pybool,
    dtype,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


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


def _check_int_range(d: list[int], t: dtype) -> list[int]:
    """`d` unless a value is out of `t`'s range (numpy would wrap: NotImplementedError)."""
    if d and (max(d) > t._hi or min(d) < t._lo):
        raise _NIE(f"listnp: {t} overflow (numpy would wrap around)")
    return d
