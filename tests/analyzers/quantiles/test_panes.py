"""Pane sketches built vectorized equal QuantileSketch per pane, and SQL merges equal Python merges."""

from __future__ import annotations

from collections.abc import Callable

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzers.quantiles.panes import BUCKET_SCHEMA, PANE_SCHEMA, bucket_ids, build, grouped, merged
from analyzers.sketch.core import QuantileSketch
from fleetscope.errors import SketchError

FINITE = st.floats(allow_nan=False, allow_infinity=False, width=64)
VALUES = st.one_of(
    FINITE,
    st.sampled_from([0.0, -0.0, 1.0, 95.0, 100.0, 5e-324, -1e300, 0.5, 1e-310]),
    st.integers(-300, 300).map(float),
)


def source(conn: duckdb.DuckDBPyConnection, panes: list[int], values: list[float]) -> str:
    """A `build` source with one pane per distinct number in `panes` (varying every key column)."""
    n = len(values)
    table = pa.table(
        {
            "pane_ms": pa.array([p // 4 * 10_000 for p in panes], pa.int64()),
            "metric": ["gpu_util_pct" if p % 2 else "step_time_s" for p in panes],
            "cluster": pa.array([None if p % 3 == 0 else "c1" for p in panes], pa.string()),
            "job_id": pa.array([None if p % 4 == 1 else f"j{p % 4}" for p in panes], pa.string()),
            "host": ["h1"] * n,
            "gpu_index": pa.array([None if p % 5 == 0 else p % 8 for p in panes], pa.int16()),
            "value": pa.array(values, pa.float64()),
        }
    )
    conn.register("src", table)
    return "SELECT * FROM src"


def per_pane(panes: list[int], values: list[float]) -> dict[int, QuantileSketch]:
    out: dict[int, QuantileSketch] = {}
    for p, v in zip(panes, values, strict=True):
        out.setdefault(p, QuantileSketch()).add(np.array([v]))
    return out


@pytest.mark.parametrize("builder", [build, grouped], ids=["numpy-sort", "sql-group-by"])
@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 11), VALUES), min_size=1, max_size=300))
def test_vectorized_panes_equal_one_sketch_per_pane(
    builder: Callable[..., tuple[pa.Table, pa.Table]], rows: list[tuple[int, float]]
) -> None:
    panes, values = [p for p, _ in rows], [v for _, v in rows]
    conn = duckdb.connect()
    built_panes, built_buckets = builder(conn, source(conn, panes, values))
    assert built_panes.schema == PANE_SCHEMA and built_buckets.schema == BUCKET_SCHEMA
    expected = per_pane(panes, values)
    assert built_panes.num_rows == len(expected)
    conn.register("p", built_panes)
    conn.register("b", built_buckets)
    keys = ["pane_start", "metric", "cluster", "job_id", "host", "gpu_index"]
    got = merged(conn, "SELECT * FROM b", "SELECT * FROM p", keys)
    by_values = {}
    for sketch in got.values():
        by_values[tuple(sketch.buckets()[0]), tuple(sketch.buckets()[1]), tuple(sketch.top)] = (
            sketch
        )
    for sketch in expected.values():
        ids, counts = sketch.buckets()
        match = by_values[tuple(ids), tuple(counts), tuple(sketch.top)]
        assert match.bottom == sketch.bottom and match.count == sketch.count
    assert sorted(built_panes.column("count").to_pylist()) == sorted(
        s.count for s in expected.values()
    )


@settings(deadline=None)
@given(st.lists(VALUES, min_size=1, max_size=200))
def test_bucket_ids_are_the_sketch_ids_and_ascend_with_values(values: list[float]) -> None:
    array = np.sort(np.array(values, dtype=np.float64))
    ids = bucket_ids(array)
    assert (np.diff(ids) >= 0).all()
    sketch = QuantileSketch()
    sketch.add(array)
    uniq, counts = np.unique(ids, return_counts=True)
    assert np.array_equal(uniq, sketch.buckets()[0]) and np.array_equal(counts, sketch.buckets()[1])


def test_sql_group_by_bucket_equals_python_merge_and_the_one_pass_sketch() -> None:
    rng = np.random.default_rng(6)
    n = 60_000
    values = np.concatenate(
        [rng.lognormal(-1, 1.5, n - 2000), np.zeros(1000), rng.integers(0, 101, 1000)]
    )
    rng.shuffle(values)
    panes = rng.integers(0, 400, n).tolist()  # 100 panes of 10 s x 2 metrics x ...
    conn = duckdb.connect()
    built_panes, built_buckets = build(conn, source(conn, panes, values.tolist()))
    conn.register("p", built_panes)
    conn.register("b", built_buckets)
    # the plain SQL merge: one row per bucket with the sum of the panes' counts
    sql_rows = conn.execute(
        "SELECT bucket, sum(count) FROM b GROUP BY bucket ORDER BY bucket"
    ).fetchall()
    python = QuantileSketch()
    for sketch in per_pane(panes, values.tolist()).values():
        python.merge(sketch)
    ids, counts = python.buckets()
    assert sql_rows == list(zip(ids.tolist(), counts.tolist(), strict=True))
    # `merged` (SQL merge + extremes) is bit-identical to the Python merge and to one pass
    (fleet,) = merged(conn, "SELECT * FROM b", "SELECT * FROM p", []).values()
    one_pass = QuantileSketch()
    one_pass.add(values)
    qs = [0.0, 0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0]
    for other in (python, one_pass):
        assert np.array_equal(fleet.buckets()[0], other.buckets()[0])
        assert np.array_equal(fleet.buckets()[1], other.buckets()[1])
        assert (fleet.top, fleet.bottom) == (other.top, other.bottom)
        assert np.array_equal(fleet.quantiles(qs), other.quantiles(qs))
    exact = np.quantile(values, qs, method="inverted_cdf")
    assert np.allclose(fleet.quantiles(qs), exact, rtol=0.01, atol=0)


def test_rows_that_no_sketch_could_give_are_refused() -> None:
    with pytest.raises(SketchError, match="1 top / 1 bottom values for 2 values"):
        QuantileSketch.from_buckets([5, 6], [1, 1], [2.0], [1.0])
    with pytest.raises(SketchError, match="top descending"):
        QuantileSketch.from_buckets([5, 6], [1, 1], [1.0, 2.0], [1.0, 2.0])


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.integers(0, 40), st.one_of(st.sampled_from([0.0, 1.0, 99.0, 100.0]), VALUES)),
        min_size=1,
        max_size=300,
    ),
    top_k=st.integers(1, 6),
)
def test_a_merge_of_many_panes_keeps_the_k_largest_and_smallest_of_all_their_values(
    rows: list[tuple[int, float]], top_k: int
) -> None:
    """The merge sorts the lists of the k panes with the largest maxima (smallest minima), not
    every pane's: ties across panes included, the extremes are those of every value."""
    panes, values = [p for p, _ in rows], [v + 0.0 for _, v in rows]
    conn = duckdb.connect()
    built_panes, built_buckets = build(conn, source(conn, panes, values), top_k)
    conn.register("p", built_panes)
    conn.register("b", built_buckets)
    (whole,) = merged(conn, "SELECT * FROM b", "SELECT * FROM p", [], top_k=top_k).values()
    assert list(whole.top) == sorted(values, reverse=True)[:top_k]
    assert list(whole.bottom) == sorted(values)[:top_k]
