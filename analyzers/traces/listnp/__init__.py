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

Modules (each imports only the ones above it; `__init__` binds the few names ndarray's methods
need from the ones below, see the end of this file):
- `_dtypes`: dtype, the scalar types (float64, int64, ...), shared constants;
- `_casting`: promotion (numpy 2's rules, NEP 50 weak scalars) and casting of elements;
- `_array_methods`: ndarray's conversions, operators and methods (its base class);
- `_array`: ndarray itself (storage, views, attributes, indexing) and `_wrap`;
- `_construction`: array/asarray, zeros/ones/full/*_like, arange, linspace, frombuffer, fromiter,
  the 0-d array;
- `_elementwise`: the arithmetic, comparison and maximum/minimum kernels;
- `_reductions`: sum (numpy's pairwise summation), mean, max/min, argmax, nansum, cumsum, bincount;
- `_functions`: concatenate, append, nonzero, where, choose, diff, repeat, stack, broadcast_to;
- `_mathfuncs`: isnan/isfinite/isinf, floor/ceil/trunc, round, sqrt, absolute, clip;
- `_sorting`: argsort and its `tie_order` hook, sort, lexsort, searchsorted;
- `_sets`: unique, isin;
- `_ufuncs`: the ufunc objects (maximum.reduceat, add.reduce, ...) and the logical functions.
"""

# ruff: noqa: F401  (the imports below are the package's names: numpy's, re-exported)

from __future__ import annotations

import math

from analyzers.traces.listnp import (
    _array,
    _array_methods,
    _construction,
    _elementwise,
    _functions,
    _mathfuncs,
    _reductions,
    _sorting,
)
from analyzers.traces.listnp._array import ndarray
from analyzers.traces.listnp._construction import (
    arange,
    array,
    asanyarray,
    asarray,
    ascontiguousarray,
    empty,
    empty_like,
    frombuffer,
    fromiter,
    full,
    full_like,
    linspace,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from analyzers.traces.listnp._dtypes import (
    _NIE,
    BOOL,
    C128,
    F64,
    I8,
    I16,
    I32,
    I64,
    OBJ,
    U8,
    U16,
    U32,
    U64,
    bool_,
    cdouble,
    complex128,
    complexfloating,
    double,
    dtype,
    float64,
    float_,
    floating,
    generic,
    inexact,
    int8,
    int16,
    int32,
    int64,
    int_,
    integer,
    intp,
    number,
    object_,
    signedinteger,
    str_,
    uint8,
    uint16,
    uint32,
    uint64,
    unsignedinteger,
)
from analyzers.traces.listnp._functions import (
    append,
    broadcast_to,
    choose,
    concatenate,
    count_nonzero,
    diff,
    flatnonzero,
    nonzero,
    repeat,
    stack,
    where,
)
from analyzers.traces.listnp._mathfuncs import (
    _np_round,
    absolute,
    around,
    ceil,
    clip,
    floor,
    isfinite,
    isinf,
    isnan,
    sqrt,
    trunc,
)
from analyzers.traces.listnp._reductions import (
    _np_all,
    _np_any,
    _np_sum,
    amax,
    amin,
    bincount,
    cumsum,
    mean,
    nansum,
)
from analyzers.traces.listnp._sets import isin, unique
from analyzers.traces.listnp._sorting import (
    TieOrderUnknown,
    argsort,
    lexsort,
    searchsorted,
    sort,
    tie_order,
)
from analyzers.traces.listnp._ufuncs import (
    add,
    bitwise_and,
    bitwise_or,
    bitwise_xor,
    divide,
    equal,
    floor_divide,
    greater,
    greater_equal,
    less,
    less_equal,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    maximum,
    minimum,
    mod,
    multiply,
    not_equal,
    remainder,
    subtract,
    true_divide,
    ufunc,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
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


# ndarray's methods call functions of the modules that import `_array` (an import there would be a
# cycle): they are bound into the globals of `_array` and `_array_methods` here, once every module
# is loaded (their TYPE_CHECKING blocks declare them for mypy). Nothing calls them before this.
vars(_array).update(asarray=asarray, _Zerod=_construction._Zerod)
vars(_array_methods).update(
    _wrap=_array._wrap,
    _view=_array._view,
    _cast_scalar=_array._cast_scalar,
    _set_data=_array._set_data,
    _take=_array._take,
    asarray=asarray,
    _arith=_elementwise._arith,
    _compare=_elementwise._compare,
    _power=_elementwise._power,
    _inplace=_elementwise._inplace,
    _sum=_reductions._sum,
    _mean=_reductions._mean,
    _extreme=_reductions._extreme,
    _argextreme=_reductions._argextreme,
    cumsum=cumsum,
    argsort=_sorting.argsort,
    sort=sort,
    searchsorted=searchsorted,
    repeat=repeat,
    flatnonzero=flatnonzero,
    _np_round=_np_round,
    clip=clip,
)

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
