"""A QuantileSketch's bytes back to a sketch (`QuantileSketch.from_bytes`), every field checked:
a corrupt or foreign blob raises SketchError, never yields a wrong sketch. The layout is written
by `QuantileSketch.to_bytes` (analyzers/sketch/core.py).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

import numpy as np

from analyzers.sketch.codec import decode_counts, decode_varints, unzigzag
from analyzers.sketch.mapping import mantissa_bits_for
from fleetscope.errors import SketchError

if TYPE_CHECKING:
    from analyzers.sketch.core import QuantileSketch

_MAGIC = b"FQS1"
_HEADER = struct.Struct("<4sdBBBB")
_SUM_HEADER = struct.Struct("<HH")


def _decode(cls: type[QuantileSketch], data: memoryview) -> QuantileSketch:
    if len(data) < _HEADER.size or bytes(data[:4]) != _MAGIC:
        raise SketchError("not a fleetscope quantile sketch (bad magic or too short)")
    _, accuracy, m, k, n_top, n_bottom = _HEADER.unpack_from(data)
    if not (1e-6 <= accuracy < 0.5) or mantissa_bits_for(accuracy) != m:
        raise SketchError(f"corrupt sketch header: relative_accuracy={accuracy}, m={m}")
    if k < 1 or n_top > k or n_bottom > k:
        raise SketchError(
            f"corrupt sketch header: m={m}, top_k={k}, top={n_top}, bottom={n_bottom}"
        )
    at = _HEADER.size
    end_floats = at + 8 * (n_top + n_bottom)
    if len(data) < end_floats + _SUM_HEADER.size:
        raise SketchError("corrupt sketch: truncated")
    extremes = np.frombuffer(data[at:end_floats], dtype="<f8").astype(np.float64)
    top, bottom = extremes[:n_top], extremes[n_top:]
    if not np.isfinite(extremes).all() or (np.diff(top) > 0).any() or (np.diff(bottom) < 0).any():
        raise SketchError("corrupt sketch: extreme values not finite or not sorted")
    shift, n_mantissa = _SUM_HEADER.unpack_from(data, end_floats)
    at = end_floats + _SUM_HEADER.size
    if len(data) < at + n_mantissa:
        raise SketchError("corrupt sketch: truncated sum")
    units = int.from_bytes(data[at : at + n_mantissa], "little", signed=True) << shift
    varints = decode_varints(data[at + n_mantissa :])
    sketch = cls(accuracy, k)
    fields = [int(v) for v in varints[:2]]
    if len(fields) < 2:
        raise SketchError("corrupt sketch: truncated counts")
    sketch._nans, sketch._zeros = fields
    at = 2
    key_floor = int(sketch._map.keys(np.array([5e-324]))[0])
    key_ceiling = int(sketch._map.keys(np.array([np.finfo(np.float64).max]))[0])
    for store in (sketch._pos, sketch._neg):
        if at + 2 > varints.size:
            raise SketchError("corrupt sketch: truncated bucket store")
        key_lo, n_tokens = unzigzag(int(varints[at])), int(varints[at + 1])
        tokens = varints[at + 2 : at + 2 + n_tokens]
        if tokens.size != n_tokens:
            raise SketchError("corrupt sketch: truncated bucket store")
        at += 2 + n_tokens
        counts = decode_counts(tokens)
        if counts.size:
            if not counts[0] or not counts[-1]:
                raise SketchError("corrupt sketch: bucket store not trimmed")
            if key_lo < key_floor or key_lo + counts.size - 1 > key_ceiling:
                raise SketchError("corrupt sketch: bucket key out of range")
            store.add(key_lo, counts, int(counts.sum()))
    if at != varints.size:
        raise SketchError("corrupt sketch: trailing data")
    n = sketch._pos.total + sketch._neg.total + sketch._zeros
    if n_top != min(k, n) or n_bottom != min(k, n):
        raise SketchError("corrupt sketch: extreme values do not match the count")
    sketch._sum_units = units
    sketch._top, sketch._bottom = (top + 0.0).tolist(), (bottom + 0.0).tolist()
    return sketch
