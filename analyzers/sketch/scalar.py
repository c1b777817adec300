"""The pure-Python scalar buffer behind `QuantileSketch.add(float)`, for hosts without the C one.

`QuantileSketch` subclasses a scalar buffer: the C type of analyzers/sketch/_sketch_scalar.c where it was
compiled at install time (it reaches the 10 M scalar adds/s of ../shared/sketches.md; no Python
method can on CPython 3.11), else this class, which has the same interface and gives bit-identical
sketches at 7-8 M adds/s (tests/analyzers/sketch/test_scalar_path.py proves the equality).
`analyzers.sketch.core.SCALAR_PATH` says which one is in use.

The interface, for both: `add(values)` buffers an exact, finite `float` and calls `self._flush()`
once SCALAR_BUFFER are buffered; anything else goes to `self._add_other(values)`. `_flush` takes
the buffered values with `_take_scalars()` (native float64 bytes, in the order added) and
`_scalar_count` says how many there are. This module must never decide anything about a value
beyond "exact float and finite": every other rule lives in `QuantileSketch._add_other`, once.
"""

from __future__ import annotations

from array import array
from typing import Self

import numpy.typing as npt

__all__ = ["SCALAR_BUFFER", "ScalarBuffer"]

SCALAR_BUFFER = 4_096  # scalars buffered before one vectorized ingest; the C type's must match


class ScalarBuffer:
    """Buffers finite floats given to `add`; the subclass defines `_flush` and `_add_other`."""

    __slots__ = ("_scalars",)

    _scalars: list[float]

    def __new__(cls, *args: object, **kwargs: object) -> Self:
        # Set up here, not in __init__, so that `cls.__new__(cls)` (copy, unpickling) has a buffer.
        self = super().__new__(cls)
        self._scalars = []
        return self

    def add(self, values: float | npt.ArrayLike) -> None:
        """Add one value or an array of values (see the class doc for NaN and infinities)."""
        if values.__class__ is float and values - values == 0.0:
            scalars = self._scalars
            scalars.append(values)
            if len(scalars) < SCALAR_BUFFER:
                return
            self._flush()
            return
        self._add_other(values)

    @property
    def _scalar_count(self) -> int:
        return len(self._scalars)

    def _take_scalars(self) -> bytes:
        taken = array("d", self._scalars).tobytes()
        self._scalars = []
        return taken

    def _flush(self) -> None:
        raise NotImplementedError("the subclass ingests what _take_scalars() gives")

    def _add_other(self, values: float | npt.ArrayLike) -> None:
        raise NotImplementedError("the subclass adds everything but finite floats")
