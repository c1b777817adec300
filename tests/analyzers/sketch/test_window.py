"""Sliding windows: adding the entering pane and subtracting the leaving one answers exactly like
merging the panes of the window afresh, after any number of slides."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzers.sketch.core import QuantileSketch, SlidingQuantiles
from fleetscope.errors import SketchError

from .oracle import QS, assert_value_error_within, state

pane_values = st.lists(
    st.one_of(st.floats(allow_nan=True, allow_infinity=False), st.integers(0, 100).map(float)),
    max_size=40,
)


@settings(max_examples=80, deadline=None)
@given(st.lists(pane_values, min_size=1, max_size=25), st.integers(1, 6))
def test_every_slide_equals_a_fresh_merge_of_the_window(
    panes: list[list[float]], size: int
) -> None:
    window = SlidingQuantiles(panes=size, top_k=3)
    sketches = []
    for values in panes:
        pane = QuantileSketch(top_k=3)
        pane.add(np.array(values, dtype=np.float64))
        sketches.append(pane)
        window.push(pane)
        fresh = QuantileSketch(top_k=3)
        for kept in sketches[-size:]:
            fresh.merge(kept)
        assert state(window.to_sketch()) == state(fresh)
        assert window.to_sketch().to_bytes() == fresh.to_bytes()
        np.testing.assert_array_equal(window.quantiles(QS), fresh.quantiles(QS))
        assert (window.count, window.nan_count, window.sum) == (
            fresh.count,
            fresh.nan_count,
            fresh.sum,
        )
        assert np.array_equal([window.min, window.max], [fresh.min, fresh.max], equal_nan=True)
        in_window = [v for vs in panes[max(0, len(sketches) - size) : len(sketches)] for v in vs]
        in_window = [v for v in in_window if v == v]
        if in_window:
            assert_value_error_within(window.quantiles(QS), in_window, QS, fresh.error_bound)


def test_a_pane_changed_after_push_does_not_change_the_window() -> None:
    window = SlidingQuantiles(panes=2)
    pane = QuantileSketch()
    pane.add(np.array([1.0, 2.0]))
    window.push(pane)
    pane.add(np.array([1000.0]))
    assert window.max == 2.0 and window.count == 2


def test_a_decreasing_stream_keeps_the_exact_window_max() -> None:
    window = SlidingQuantiles(panes=10, top_k=2)
    for step in range(100, 0, -1):
        pane = QuantileSketch(top_k=2)
        pane.add(np.array([float(step)]))
        window.push(pane)
        assert window.max == float(min(100, step + 9))
        assert window.min == float(step)


def test_bad_window_arguments_are_refused() -> None:
    with pytest.raises(SketchError, match="panes must be a positive integer"):
        SlidingQuantiles(panes=0)
    window = SlidingQuantiles(panes=3, relative_accuracy=0.01)
    with pytest.raises(SketchError, match="different layouts"):
        window.push(QuantileSketch(relative_accuracy=0.05))
    assert np.isnan(window.quantiles([0.5])).all()
