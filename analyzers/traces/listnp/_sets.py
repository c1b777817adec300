"""Set functions: unique (numpy's `_unique1d`) and isin."""

from __future__ import annotations

import operator
from itertools import accumulate as _accumulate
from itertools import compress as _compress

from analyzers.traces.listnp._array import _wrap, ndarray
from analyzers.traces.listnp._casting import _promote
from analyzers.traces.listnp._construction import _arr1
from analyzers.traces.listnp._dtypes import _NIE, BOOL, I64
from analyzers.traces.listnp._elementwise import _as, _mixed_zero
from analyzers.traces.listnp._sorting import _stable_order

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_ne = operator.ne
_sub = operator.sub


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
