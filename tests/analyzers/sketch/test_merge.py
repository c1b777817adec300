"""Merging is lossless: any split into add() calls and any merge order give the same sketch, bit
for bit (the sum: see test_sum_*)."""

from __future__ import annotations

import itertools
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzers.sketch.core import QuantileSketch
from fleetscope.errors import SketchError

from .oracle import QS, ingest_chunk, state

finite = st.floats(allow_nan=True, allow_infinity=False, width=64)
data_lists = st.lists(st.one_of(finite, st.integers(-3, 130).map(float)), min_size=0, max_size=200)


def _split(data: list[float], cuts: list[int]) -> list[list[float]]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


@settings(max_examples=200, deadline=None)
@given(data_lists, st.lists(st.integers(0, 1000), max_size=6), st.randoms(use_true_random=False))
def test_merging_parts_in_any_order_equals_one_pass(
    data: list[float], cuts: list[int], rnd: object
) -> None:
    whole = QuantileSketch(top_k=3)
    whole.add(np.array(data, dtype=np.float64))
    parts = []
    for piece in _split(data, cuts):
        part = QuantileSketch(top_k=3)
        part.add(np.array(piece, dtype=np.float64))
        parts.append(part)
    rnd.shuffle(parts)  # type: ignore[attr-defined]
    merged = QuantileSketch(top_k=3)
    for part in parts:
        merged.merge(part)
    assert state(merged) == state(whole)
    np.testing.assert_array_equal(merged.quantiles(QS), whole.quantiles(QS))
    # Same parts, another order: identical bytes, sum included (it is exact under merging).
    rnd.shuffle(parts)  # type: ignore[attr-defined]
    again = QuantileSketch(top_k=3)
    for part in parts:
        again.merge(part)
    assert again.to_bytes() == merged.to_bytes()


@settings(max_examples=100, deadline=None)
@given(data_lists, st.integers(1, 7))
def test_scalar_adds_chunked_ingest_and_one_batch_agree(data: list[float], chunk: int) -> None:
    batch = QuantileSketch(top_k=2)
    batch.add(np.array(data, dtype=np.float64))
    scalars = QuantileSketch(top_k=2)
    for value in data:
        scalars.add(value)
    chunked = QuantileSketch(top_k=2)
    with ingest_chunk(chunk):
        chunked.add(np.array(data, dtype=np.float64))
    assert state(scalars) == state(batch) == state(chunked)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 100), max_size=300), st.lists(st.integers(0, 300), max_size=5))
def test_sum_of_integer_data_is_identical_for_every_split(data: list[int], cuts: list[int]) -> None:
    whole = QuantileSketch()
    whole.add(np.array(data))
    merged = QuantileSketch()
    for piece in _split([float(v) for v in data], cuts):
        part = QuantileSketch()
        part.add(np.array(piece))
        merged.merge(part)
    assert merged.sum == whole.sum == float(sum(data))
    assert merged.to_bytes() == whole.to_bytes()


def test_sum_of_float_data_is_within_rounding_of_the_exact_sum() -> None:
    rng = np.random.default_rng(3)
    data = rng.lognormal(0.0, 2.0, 100_000)
    merged = QuantileSketch()
    for piece in np.array_split(data, 37):
        part = QuantileSketch()
        part.add(piece)
        merged.merge(part)
    exact = float(np.sum(np.sort(data)))  # pairwise over sorted: a close reference
    assert merged.sum == math.fsum([float(np.sum(p)) for p in np.array_split(data, 37)])
    assert abs(merged.sum - exact) <= 1e-12 * exact
    assert abs(merged.sum - math.fsum(data.tolist())) <= 1e-12 * exact


def test_a_sketch_merged_with_itself_doubles_every_count() -> None:
    sketch = QuantileSketch(top_k=4)
    sketch.add(np.array([1.0, 2.0, 3.0, -1.0, 0.0]))
    twice = QuantileSketch(top_k=4)
    twice.add(np.array([1.0, 2.0, 3.0, -1.0, 0.0] * 2))
    sketch.merge(sketch)
    assert state(sketch) == state(twice)


def test_sketches_of_different_layouts_do_not_merge() -> None:
    with np.testing.assert_raises_regex(SketchError, "different layouts"):
        QuantileSketch(relative_accuracy=0.01).merge(QuantileSketch(relative_accuracy=0.05))
    with np.testing.assert_raises_regex(SketchError, "different layouts"):
        QuantileSketch(top_k=8).merge(QuantileSketch(top_k=16))
    with np.testing.assert_raises_regex(SketchError, "cannot merge a list"):
        QuantileSketch().merge([1.0])  # type: ignore[arg-type]
