"""Edge inputs: empty, one value, NaN, infinities, negatives, -0.0, zeros, huge and tiny values,
Python scalars and integer arrays, bad quantiles and bad arguments."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analyzers.sketch.core import QuantileSketch
from fleetscope.errors import SketchError

from .oracle import QS, ingest_chunk, state


def test_an_empty_sketch_answers_nan_and_counts_nothing() -> None:
    sketch = QuantileSketch()
    assert np.isnan(sketch.quantiles(QS)).all() and sketch.quantiles(QS).shape == QS.shape
    assert (sketch.count, sketch.nan_count, sketch.sum) == (0, 0, 0.0)
    assert math.isnan(sketch.min) and math.isnan(sketch.max)
    sketch.add(np.array([]))
    assert sketch.count == 0


def test_one_value_is_every_quantile() -> None:
    sketch = QuantileSketch()
    sketch.add(840.123)
    np.testing.assert_array_equal(sketch.quantiles(QS), np.full(QS.shape, 840.123))
    assert sketch.quantiles(0.5).shape == ()


def test_nan_is_counted_and_ignored() -> None:
    sketch = QuantileSketch()
    sketch.add(np.array([np.nan, 1.0, np.nan, 3.0, -np.nan]))
    sketch.add(math.nan)
    assert (sketch.count, sketch.nan_count) == (2, 4)
    np.testing.assert_array_equal(sketch.quantiles([0.0, 0.5, 1.0]), [1.0, 1.0, 3.0])


@pytest.mark.parametrize("bad", [math.inf, -math.inf])
def test_an_infinity_is_refused_and_nothing_of_that_call_is_kept(bad: float) -> None:
    sketch = QuantileSketch()
    sketch.add(np.array([5.0, 6.0]))
    before = (sketch.to_bytes(), sketch.sum)
    # The infinity sits in the second chunk: the first chunk must not stay either.
    with (
        ingest_chunk(2),
        pytest.raises(SketchError, match=r"cannot add -?inf \(at index 3\).*nothing of this call"),
    ):
        sketch.add(np.array([1.0, 2.0, 0.0, bad, 7.0]))
    with pytest.raises(ValueError, match="finite values"):
        sketch.add(bad)
    assert (sketch.to_bytes(), sketch.sum) == before


def test_negatives_zeros_and_negative_zero() -> None:
    data = np.array([-1e300, -250.0, -3.0, -3.0, -0.0, 0.0, 0.0, 2.0, 1e-300, 7.5e300])
    sketch = QuantileSketch(top_k=1)
    sketch.add(data)
    qs = np.arange(len(data)) / (len(data) - 1)
    got = sketch.quantiles(qs)
    want = np.quantile(data, qs, method="inverted_cdf")
    assert np.all(np.abs(got - want) <= 2**-7 * np.abs(want))
    assert sketch.zero_count == 3 and got[4] == 0.0 and got[5] == 0.0
    assert (sketch.min, sketch.max) == (-1e300, 7.5e300)
    assert sketch.sum == math.fsum(data.tolist())


def test_the_largest_and_smallest_magnitudes() -> None:
    big = np.finfo(np.float64).max
    tiny = 5e-324
    sketch = QuantileSketch(top_k=1)
    sketch.add(np.array([big, big, big, tiny, tiny, tiny, -big, -tiny]))
    got = sketch.quantiles([0.2, 0.5, 0.7])
    np.testing.assert_allclose(got, [-tiny, tiny, big], rtol=2**-7)
    assert sketch.sum == math.inf  # 2 * DBL_MAX: the exact sum, rounded, overflows


def test_scalars_of_every_numeric_kind_are_accepted() -> None:
    sketch = QuantileSketch()
    for value in (1, 2.5, np.float32(3.0), np.int64(4), True):
        sketch.add(value)
    sketch.add([5, 6])
    sketch.add(np.array([[7, 8]], dtype=np.uint8))
    assert sketch.count == 9 and sketch.max == 8.0 and sketch.min == 1.0


def test_things_that_are_not_numbers_are_refused() -> None:
    sketch = QuantileSketch()
    with pytest.raises(SketchError, match="cannot add str"):
        sketch.add("95")
    with pytest.raises(SketchError, match="cannot add int"):
        sketch.add(10**400)
    assert sketch.count == 0


@pytest.mark.parametrize("qs", [[-0.1], [1.5], [math.nan], "p99"])
def test_quantiles_outside_zero_one_are_refused(qs: object) -> None:
    sketch = QuantileSketch()
    sketch.add(1.0)
    with pytest.raises(SketchError, match="quantiles must be"):
        sketch.quantiles(qs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"relative_accuracy": 0.0}, "relative_accuracy must be"),
        ({"relative_accuracy": 0.7}, "relative_accuracy must be"),
        ({"relative_accuracy": "1%"}, "relative_accuracy must be"),
        ({"top_k": 0}, "top_k must be"),
        ({"top_k": 1000}, "top_k must be"),
    ],
)
def test_bad_layouts_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(SketchError, match=message):
        QuantileSketch(**kwargs)  # type: ignore[arg-type]


def test_reads_see_buffered_scalars() -> None:
    one_by_one = QuantileSketch()
    for value in range(10_000):
        one_by_one.add(float(value))
    batch = QuantileSketch()
    batch.add(np.arange(10_000, dtype=np.float64))
    assert state(one_by_one) == state(batch) and one_by_one.sum == batch.sum
