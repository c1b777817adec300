"""The elementwise kernels behind the operators and the binary ufuncs: arithmetic (`_arith`),
comparison (`_compare`), `** 2`, maximum/minimum (`_minmax`) and `a op= b` (`_inplace`), with
numpy's broadcasting of a scalar or a length-1 array and its promotion."""

from __future__ import annotations

import math
import operator
from itertools import repeat as _repeat

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
    _MOD,
    _MUL,
    _NE,
    _OR,
    _SUB,
    _TDIV,
)
from analyzers.traces.listnp._casting import (
    _cast,
    _check_int_range,
    _plain,
    _promote,
    _same_kind,
    _weak_kind,
    _weak_promote,
)
from analyzers.traces.listnp._construction import _Zerod, asarray
from analyzers.traces.listnp._dtypes import _NIE, BOOL, F64, I64, OBJ, _pybool, dtype

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

_add = operator.add
_and = operator.and_
_copysign = math.copysign
_eq = operator.eq
_ge = operator.ge
_gt = operator.gt
_le = operator.le
_lt = operator.lt
_mul = operator.mul
_ne = operator.ne
_or = operator.or_
_sub = operator.sub
_xor = operator.xor


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
