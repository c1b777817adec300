"""A sliding window of pane sketches: the entering pane's counts added, the leaving pane's
subtracted (O(buckets) per slide, whatever the window's length), the raw extremes kept by
two-stack aggregation (analyzers/sketch/chunks.py's `_Extremes`). Window quantiles are never
estimated from per-pane quantiles. `analyzers.sketch.core.SlidingQuantiles` is this window over
that module's QuantileSketch.
"""

from __future__ import annotations

import math
from collections import deque
from typing import TYPE_CHECKING, ClassVar

import numpy.typing as npt

from analyzers.sketch.chunks import Floats, _Extremes
from analyzers.sketch.ranks import _quantiles
from fleetscope.errors import SketchError

if TYPE_CHECKING:
    from analyzers.sketch.core import QuantileSketch

DEFAULT_RELATIVE_ACCURACY = 0.01  # the 1 % target of ../shared/sketches.md
DEFAULT_TOP_K = 16  # "k about 8-32" (../shared/sketches.md, "Panes")


class SlidingWindow:
    """Quantiles over the last `panes` pushed sketches (for example 360 panes of 10 s for 1 h).

    `push(sketch)` copies the pane in; when the window is full the oldest pane leaves. Its answers
    are bit-identical to merging the panes in the window afresh.
    """

    __slots__ = ("_extremes", "_panes", "_size", "_total")
    sketch_type: ClassVar[type[QuantileSketch]]  # the concrete sketch (core.SlidingQuantiles)

    def __init__(
        self,
        panes: int,
        relative_accuracy: float = DEFAULT_RELATIVE_ACCURACY,
        top_k: int = DEFAULT_TOP_K,
    ) -> None:
        if not (isinstance(panes, int) and panes >= 1):
            raise SketchError(f"panes must be a positive integer, got {panes!r}")
        self._size = panes
        self._total = self.sketch_type(relative_accuracy, top_k)
        self._panes: deque[QuantileSketch] = deque()
        self._extremes = _Extremes(top_k)

    def push(self, sketch: QuantileSketch) -> None:
        """Make `sketch` the newest pane (a copy: later changes to it do not reach the window)."""
        pane = self._total._check_compatible(sketch).copy()
        if len(self._panes) == self._size:
            self._total._subtract_counts(self._panes.popleft())
            self._extremes.pop()
        self._panes.append(pane)
        total = self._total
        total._pos.merge(pane._pos)
        total._neg.merge(pane._neg)
        total._zeros += pane._zeros
        total._nans += pane._nans
        total._sum_units += pane._sum_units
        self._extremes.push(pane._top, pane._bottom)

    def __len__(self) -> int:
        return len(self._panes)

    def quantiles(self, qs: float | npt.ArrayLike) -> Floats:
        total = self._total
        top, bottom = self._extremes.value()
        return _quantiles(total._map, total._pos, total._neg, total._zeros, top, bottom, qs)

    def to_sketch(self) -> QuantileSketch:
        """The window as one sketch, equal to merging its panes."""
        merged = self._total.copy()
        merged._top, merged._bottom = (list(x) for x in self._extremes.value())
        return merged

    @property
    def count(self) -> int:
        return self._total.count

    @property
    def nan_count(self) -> int:
        return self._total.nan_count

    @property
    def sum(self) -> float:
        return self._total.sum

    @property
    def min(self) -> float:
        bottom = self._extremes.value()[1]
        return bottom[0] if bottom else math.nan

    @property
    def max(self) -> float:
        top = self._extremes.value()[0]
        return top[0] if top else math.nan
