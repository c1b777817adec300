"""The guarantee: every quantile within the configured relative value error of numpy's exact
`inverted_cdf` answer, for any finite input; zeros, small integers and the kept extremes exact."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzers.sketch.core import QuantileSketch

from .oracle import QS, assert_value_error_within, ingest_chunk

finite = st.floats(allow_nan=False, allow_infinity=False)
positive_heavy = st.floats(min_value=1e-300, max_value=1e300)
small_ints = st.integers(min_value=-5, max_value=300).map(float)
values = st.lists(
    st.one_of(finite, positive_heavy, small_ints, st.just(0.0)), min_size=1, max_size=300
)


@settings(max_examples=300, deadline=None)
@given(values, st.sampled_from([0.01, 0.05, 0.001]))
def test_every_quantile_within_the_bound_of_numpy(data: list[float], accuracy: float) -> None:
    sketch = QuantileSketch(relative_accuracy=accuracy, top_k=4)
    sketch.add(np.array(data))
    assert sketch.error_bound <= accuracy
    assert_value_error_within(sketch.quantiles(QS), data, QS, sketch.error_bound)


@settings(max_examples=100, deadline=None)
@given(values, st.integers(min_value=1, max_value=9))
def test_the_bound_holds_across_chunk_boundaries(data: list[float], chunk: int) -> None:
    sketch = QuantileSketch(top_k=2)
    with ingest_chunk(chunk):
        sketch.add(np.array(data))
    assert_value_error_within(sketch.quantiles(QS), data, QS, sketch.error_bound)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(min_value=5e-324, max_value=1e-300), min_size=1, max_size=100))
def test_tiny_and_subnormal_magnitudes_keep_the_bound(data: list[float]) -> None:
    sketch = QuantileSketch(top_k=1)
    sketch.add(np.array(data))
    assert_value_error_within(sketch.quantiles(QS), data, QS, sketch.error_bound)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=256), min_size=1, max_size=400))
def test_integers_up_to_256_come_back_exactly(data: list[int]) -> None:
    sketch = QuantileSketch(top_k=1)
    sketch.add(np.array(data, dtype=np.uint8 if max(data) < 256 else np.int64))
    exact = np.quantile(np.array(data, dtype=np.float64), QS, method="inverted_cdf")
    np.testing.assert_array_equal(sketch.quantiles(QS), exact)


def test_a_pareto_stream_stays_within_one_percent_at_every_percentile() -> None:
    rng = np.random.default_rng(6)
    data = rng.pareto(1.5, 200_000) + 1.0
    sketch = QuantileSketch()
    sketch.add(data)
    qs = np.linspace(0, 1, 1001)
    got = sketch.quantiles(qs)
    want = np.quantile(data, qs, method="inverted_cdf")
    assert np.max(np.abs(got - want) / want) <= 2**-7


def test_the_kept_extremes_answer_the_far_tail_exactly() -> None:
    rng = np.random.default_rng(7)
    data = rng.lognormal(3.0, 2.0, 50_000)
    sketch = QuantileSketch(top_k=16)
    sketch.add(data)
    # p99.99 of 50 000 values is the 5th largest: inside the kept top 16.
    qs = [0.0, 0.0001, 0.9999, 1.0]
    np.testing.assert_array_equal(
        sketch.quantiles(qs), np.quantile(data, qs, method="inverted_cdf")
    )
    assert sketch.max == data.max() and sketch.min == data.min()
