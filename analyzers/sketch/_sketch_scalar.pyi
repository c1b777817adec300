"""Types of the C extension built from analyzers/sketch/_sketch_scalar.c (read that file's comment).

The same interface as the pure-Python fallback, analyzers/sketch/scalar.py.
"""

import numpy.typing as npt

SCALAR_BUFFER: int

class ScalarBuffer:
    """Buffers finite floats given to `add`; the subclass defines `_flush` and `_add_other`."""

    @property
    def _scalar_count(self) -> int: ...
    def add(self, values: float | npt.ArrayLike) -> None:
        """Add one value or an array of values (see the class doc for NaN and infinities)."""
    def _take_scalars(self) -> bytes: ...
