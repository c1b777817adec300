"""Reading the sketch store by time: a finer tier is read only where a coarser one may leave a key
uncovered, and the rows chosen are exactly those of the per-key anti-join over every row of the
range (`chosen_sql` without spans), on stores whose parts were kept to different marks."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzers.accounting.frames import FrameParams
from analyzers.base import JobInfo, StaticJobCatalog
from analyzers.quantiles.reading import chosen_sql, read_spans
from analyzers.quantiles.store_rows import BUCKETS, PANES, built_table
from analyzers.quantiles.tiers import QuantileStore
from analyzers.run.runner import Pipeline
from analyzers.run.window import Window
from simulator.maker.series import T0, Fleet

CATALOG = StaticJobCatalog([JobInfo(j, team=f"team-{j}") for j in "abcd"])
UTIL_WHERE = "metric = 'gpu_util_pct'"


def fleet() -> Fleet:
    """Four jobs (two partitions of two each, by job id) and an unallocated GPU, over 3.5 h."""
    made = Fleet()
    made.gpus("a", "h1", range(2), 0, 210, gpu_util=lambda i, t: float((i * 37) % 101))
    made.gpus("b", "h2", range(1), 20, 150, gpu_util=lambda i, t: 10.0 + i % 3)
    made.gpus("c", "h3", range(2), 50, 210, gpu_util=lambda i, t: float(i % 17))
    made.gpus("d", "h4", range(1), 0, 95, gpu_util=lambda i, t: 99.0 - i % 5)
    made.gpus(None, "h5", range(1), 0, 210, gpu_util=0.0)
    return made


FLEET = fleet()


def keep(store: QuantileStore, window: Window) -> None:
    conn = FLEET.connect()
    try:
        result = Pipeline((), FrameParams(), store).run(conn, window, CATALOG)
    finally:
        conn.close()
    assert result.errors == {}


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def chosen(conn: duckdb.DuckDBPyConnection, sql: str) -> list[str]:
    return sorted(map(repr, conn.execute(f"SELECT * FROM ({sql})").fetchall()))


def assert_same_rows(conn: duckdb.DuckDBPyConnection, lo: float, hi: float) -> None:
    """The rows chosen through `read_spans` equal the per-key anti-join over every row."""
    start, end = at(lo), at(hi)
    spans = read_spans(conn, start, end, UTIL_WHERE)
    for table in (BUCKETS, PANES):
        every = chosen(conn, chosen_sql(table, start, end, UTIL_WHERE))
        fast = chosen(conn, chosen_sql(table, start, end, UTIL_WHERE, spans))
        assert every == fast, (table, lo, hi)


def test_a_kept_store_reads_its_finer_tiers_only_past_the_last_whole_hour(tmp_path: Path) -> None:
    store = QuantileStore(tmp_path / "sketches")
    for end_min in (50, 95, 150, 205):
        keep(store, Window(T0, at(end_min)))
    conn = store.connect()
    spans = read_spans(conn, T0, at(204.5), UTIL_WHERE)
    # hours 0-2 hold hour rows for every key: no minute or pane of them is read
    assert spans[3600] == [(T0, at(204.5))]
    assert spans[60] == [(at(180), at(204.5))]
    assert spans[0] == [(at(204), at(204.5))]
    for lo, hi in [(0, 204.5), (30.5, 125), (61, 119), (0.5, 1), (59, 121), (0, 240)]:
        assert_same_rows(conn, lo, hi)
    conn.close()


def test_a_partition_behind_the_others_has_its_minutes_read_where_its_hours_are_missing(
    tmp_path: Path,
) -> None:
    """Partition 1 kept to 100 min, partition 0 to 205: hour 1 holds partition 0's hour rows
    only, so a choice by time alone would drop partition 1's minutes of it."""
    store = QuantileStore(tmp_path / "sketches")
    keep(store, Window(T0, at(205), 0, 2))
    keep(store, Window(T0, at(100), 1, 2))
    conn = store.connect()
    spans = read_spans(conn, T0, at(205), UTIL_WHERE)
    assert spans[60][0][0] == at(60)  # the marks' earliest hour is 1 h: read from there
    for lo, hi in [(0, 205), (30, 150), (60, 120), (95, 105), (0, 60)]:
        assert_same_rows(conn, lo, hi)
    conn.close()


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    ends=st.lists(
        st.tuples(st.integers(0, 1), st.integers(1, 42).map(lambda n: n * 5)),
        min_size=1,
        max_size=5,
    ),
    ranges=st.lists(
        st.tuples(st.integers(0, 420), st.integers(1, 420)).map(
            lambda p: (p[0] / 2, (p[0] + p[1]) / 2)
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_any_keep_schedule_and_range_choose_the_rows_of_the_per_key_anti_join(
    tmp_path_factory: pytest.TempPathFactory,
    ends: list[tuple[int, int]],
    ranges: list[tuple[float, float]],
) -> None:
    """Windows of either partition in any order (behind its marks: a rebuild), ranges with
    unaligned edges: the same rows as the anti-join over every row."""
    store = QuantileStore(tmp_path_factory.mktemp("sketches"))
    for partition, end_min in ends:
        keep(store, Window(T0, at(end_min), partition, 2))
    conn = store.connect()
    for lo, hi in ranges:
        assert_same_rows(conn, lo, hi)
    conn.close()


def built(marks: dict[str, str]) -> dict[int, str]:
    table = built_table(marks, "q/")
    return {
        int(res): at.isoformat()
        for res, at in zip(
            table.column("resolution_s").to_pylist(),
            table.column("built_until").cast(pa.timestamp("ms", tz="UTC")).to_pylist(),
            strict=True,
        )
    }


def test_every_part_has_built_a_tier_up_to_the_earliest_of_their_marks() -> None:
    h = "2025-03-03T{:02d}:00:00+00:00".format
    assert built({"q/0/2/3600s": h(5), "q/1/2/3600s": h(3), "q/0/2/60s": h(6)}) == {3600: h(3)}, (
        "a tier one part has no mark for is never taken as built"
    )
    # a cluster's part without a mark of its own goes on from its slice's
    assert built({"q/0/1/3600s": h(4), "q/0/1@west/60s": h(6), "q/0/1/60s": h(5)}) == {
        3600: h(4),
        60: h(5),
    }
    assert built({"other/0/1/60s": h(1), "q/0/1/bad": "x"}) == {}
