"""Serialization: round trips keep everything; the blob is canonical and small; corrupt blobs are
refused with SketchError, never turned into a plausible sketch."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzers.sketch.core import QuantileSketch
from fleetscope.errors import SketchError

from .oracle import QS, state

values = st.lists(st.floats(allow_nan=True, allow_infinity=False), max_size=200)


@settings(max_examples=200, deadline=None)
@given(values, st.sampled_from([0.01, 0.02, 0.1]), st.integers(1, 20))
def test_round_trip_keeps_every_answer_and_the_bytes(
    data: list[float], accuracy: float, top_k: int
) -> None:
    sketch = QuantileSketch(relative_accuracy=accuracy, top_k=top_k)
    sketch.add(np.array(data, dtype=np.float64))
    blob = sketch.to_bytes()
    back = QuantileSketch.from_bytes(blob)
    assert back.to_bytes() == blob
    assert state(back) == state(sketch)
    assert back.sum == sketch.sum and back.relative_accuracy == accuracy and back.top_k == top_k
    np.testing.assert_array_equal(back.quantiles(QS), sketch.quantiles(QS))
    # A decoded sketch keeps merging losslessly.
    back.merge(QuantileSketch.from_bytes(blob))
    sketch.merge(sketch.copy())
    assert back.to_bytes() == sketch.to_bytes()


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_damaged_blobs_are_refused_or_decode_to_a_consistent_sketch(data: st.DataObject) -> None:
    sketch = QuantileSketch(top_k=4)
    sketch.add(np.array([0.0, -2.5, 1.0, 3.0, 3.0, 1e9, 7.25, np.nan]))
    blob = bytearray(sketch.to_bytes())
    how = data.draw(st.sampled_from(["truncate", "flip", "append"]))
    if how == "truncate":
        blob = blob[: data.draw(st.integers(0, len(blob) - 1))]
    elif how == "flip":
        at = data.draw(st.integers(0, len(blob) - 1))
        blob[at] ^= data.draw(st.integers(1, 255))
    else:
        blob += bytes(data.draw(st.binary(min_size=1, max_size=4)))
    try:
        back = QuantileSketch.from_bytes(bytes(blob))
    except SketchError:
        return
    # A flip that still parses (a changed count or value) must give a self-consistent sketch.
    assert back.count == len(back.top) or back.count > back.top_k
    back.quantiles(QS)


def test_bytes_that_are_no_sketch_get_a_clear_error() -> None:
    with pytest.raises(SketchError, match="not a fleetscope quantile sketch"):
        QuantileSketch.from_bytes(b"hello world, not a sketch")
    with pytest.raises(SketchError, match="not a fleetscope quantile sketch"):
        QuantileSketch.from_bytes(b"")


def test_the_three_test_streams_serialize_under_8_kib() -> None:
    rng = np.random.default_rng(1)
    n = 1_000_000
    streams = {
        "pareto": rng.pareto(1.5, n) + 1.0,
        "utilization": np.clip(
            np.where(rng.random(n) < 0.2, 0, rng.normal(95, 8, n)).round(), 0, 100
        ),
        "lognormal": rng.lognormal(np.log(0.05), 1.0, n),
    }
    for name, stream in streams.items():
        sketch = QuantileSketch()
        sketch.add(stream)
        assert len(sketch.to_bytes()) <= 8 * 1024, name
