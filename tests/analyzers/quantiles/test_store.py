"""The sketch store kept by the analyzer runner: incremental panes under the watermark, 1 min and
1 h roll-ups by SQL merge, and range queries that count every sample exactly once."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import duckdb
import numpy as np
import pytest

from analyzers.accounting.frames import FrameParams
from analyzers.base import JobInfo, StaticJobCatalog
from analyzers.quantiles.tiers import BUCKETS, PANES, QuantileStore, group_sketches
from analyzers.run.runner import Pipeline
from analyzers.run.window import Window
from analyzers.sketch.core import QuantileSketch
from simulator.maker.series import T0, Fleet

CATALOG = StaticJobCatalog([JobInfo("a", team="vision"), JobInfo("b", team="speech")])


def util(i: int, t: float) -> float:
    return float((i * 37) % 101)


@pytest.fixture
def fleet() -> Fleet:
    fleet = Fleet()
    fleet.gpus("a", "h1", range(2), 0, 150, gpu_util=util)
    fleet.gpus("b", "h2", range(1), 20, 100, gpu_util=lambda i, t: 10.0 + i % 3)
    fleet.gpus(None, "h3", range(1), 0, 150, gpu_util=0.0)  # unallocated: kept once
    fleet.host("h1", 0, 150, job="a")
    return fleet


def keep(store: QuantileStore, fleet: Fleet, window: Window) -> None:
    conn = fleet.connect()
    try:
        result = Pipeline((), FrameParams(), store).run(conn, window, CATALOG)
    finally:
        conn.close()
    assert result.errors == {}


def exact(fleet: Fleet, start_min: float, end_min: float, job: str | None = "*") -> QuantileSketch:
    lo, hi = T0 + timedelta(minutes=start_min), T0 + timedelta(minutes=end_min)
    sketch = QuantileSketch()
    sketch.add(
        np.array(
            [
                r["gpu_util"]
                for r in fleet.gpu_rows
                if lo <= r["ts"] < hi and (job == "*" or r["job_id"] == job)
            ]
        )
    )
    return sketch


def same(a: QuantileSketch, b: QuantileSketch) -> bool:
    return (
        np.array_equal(a.buckets()[0], b.buckets()[0])
        and np.array_equal(a.buckets()[1], b.buckets()[1])
        and (a.top, a.bottom) == (b.top, b.bottom)
    )


def assert_ranges_exact(
    conn: duckdb.DuckDBPyConnection, fleet: Fleet, ranges: list[tuple[float, float]]
) -> None:
    """The fleet-wide sketch of each [lo, hi) minute range equals the exact one-pass sketch."""
    for lo, hi in ranges:
        (fleet_sketch,) = group_sketches(
            conn, "gpu_util_pct", [], T0 + timedelta(minutes=lo), T0 + timedelta(minutes=hi)
        ).values()
        assert same(fleet_sketch, exact(fleet, lo, hi)), (lo, hi)


def rows(store: QuantileStore, table: str) -> list[tuple[int, int]]:
    conn = store.connect()
    found = conn.execute(
        f"SELECT resolution_s, CAST(sum(count) AS BIGINT) FROM {table} "
        "WHERE metric = 'gpu_util_pct' GROUP BY ALL ORDER BY 1"
    ).fetchall()
    conn.close()
    return [(int(r), int(n)) for r, n in found]


def test_runs_keep_each_pane_once_roll_up_and_answer_any_range(
    fleet: Fleet, tmp_path: Path
) -> None:
    store = QuantileStore(tmp_path / "sketches")
    samples = len(fleet.gpu_rows)
    # the scheduler's windows of one bucket: the same start, a later end each tick
    for end_min in (50, 50, 95, 150, 150):
        keep(store, fleet, Window(T0, T0 + timedelta(minutes=end_min)))
    # every sample is in exactly one 10 s pane; minutes and hours are complete roll-ups of them
    two_hours = sum(r["ts"] < T0 + timedelta(hours=2) for r in fleet.gpu_rows)
    assert rows(store, PANES) == [(10, samples), (60, samples), (3600, two_hours)]
    assert rows(store, BUCKETS)[0] == (10, samples)

    conn = store.connect()
    by_job = group_sketches(conn, "gpu_util_pct", ["job_id", "team"], T0, T0 + timedelta(days=7))
    assert set(by_job) == {("a", "vision"), ("b", "speech"), (None, None)}
    assert same(by_job["a", "vision"], exact(fleet, 0, 150, "a"))
    # unaligned edges: hours inside, minutes and panes at the edges, nothing twice
    assert_ranges_exact(conn, fleet, [(0, 150), (30.5, 125), (61, 119), (0.5, 1), (59, 121)])
    conn.close()


def test_partitions_keep_their_own_jobs_and_the_unallocated_rows_once(
    fleet: Fleet, tmp_path: Path
) -> None:
    store = QuantileStore(tmp_path / "sketches")
    for partition in (0, 1):
        keep(store, fleet, Window(T0, T0 + timedelta(minutes=150), partition, 2))
    assert rows(store, PANES)[0] == (10, len(fleet.gpu_rows))
    conn = store.connect()
    (all_values,) = group_sketches(conn, "gpu_util_pct", [], T0, T0 + timedelta(hours=3)).values()
    assert same(all_values, exact(fleet, 0, 180))
    cpu = group_sketches(conn, "cpu_pct", ["job_id"], T0, T0 + timedelta(hours=3))
    assert list(cpu) == [("a",)] and cpu["a",].quantiles([0.5]).tolist() == [35.0]
    conn.close()


def test_pane_length_must_divide_a_minute(tmp_path: Path) -> None:
    from fleetscope.errors import ConfigError

    with pytest.raises(ConfigError, match="must divide 60"):
        QuantileStore(tmp_path, pane_s=7)


def test_retention_skips_old_panes_and_keeps_the_coarser_tiers_whole(
    fleet: Fleet, tmp_path: Path
) -> None:
    # panes for the last hour of data only (counted back from the newest sample, not the clock)
    store = QuantileStore(tmp_path / "sketches", retention_s={10: 3600.0})
    keep(store, fleet, Window(T0, T0 + timedelta(minutes=150)))
    newest = max(r["ts"] for r in fleet.gpu_rows)
    cutoff = T0 + timedelta(seconds=(newest - timedelta(hours=1) - T0).total_seconds() // 10 * 10)
    recent = sum(r["ts"] >= cutoff for r in fleet.gpu_rows)
    two_hours = sum(r["ts"] < T0 + timedelta(hours=2) for r in fleet.gpu_rows)
    assert 0 < recent < len(fleet.gpu_rows)
    assert rows(store, PANES) == [(10, recent), (60, len(fleet.gpu_rows)), (3600, two_hours)]
    # a range older than the kept panes still answers from whole minutes
    conn = store.connect()
    (first_hour,) = group_sketches(conn, "gpu_util_pct", [], T0, T0 + timedelta(hours=1)).values()
    assert same(first_hour, exact(fleet, 0, 60))
    conn.close()


def test_tiers_live_in_their_own_tables_and_expired_days_are_retired(tmp_path: Path) -> None:
    from warehouse.storage.segments import read_manifest

    store = QuantileStore(tmp_path / "sketches", retention_s={10: 3600.0, 60: 3600.0})
    first = Fleet()
    first.gpus("a", "h1", range(1), 0, 30, gpu_util=util)
    keep(store, first, Window(T0, T0 + timedelta(days=1)))
    live = read_manifest(store.root).tables
    assert {t for t, segs in live.items() if segs} == {
        f"{name}_{res}s" for name in (PANES, BUCKETS) for res in (10, 60, 3600)
    }
    # two days on, the first day's panes and minutes are past retention: retired; hours stay
    both = Fleet()
    both.gpus("a", "h1", range(1), 0, 30, gpu_util=util)
    both.gpus("a", "h1", range(1), 2 * 1440, 90, gpu_util=util)
    keep(store, both, Window(T0 + timedelta(days=2), T0 + timedelta(days=3)))
    days = {
        t: sorted({s.date for s in segs}) for t, segs in read_manifest(store.root).tables.items()
    }
    assert days[f"{PANES}_10s"] == ["2025-03-05"] and days[f"{PANES}_60s"] == ["2025-03-05"]
    assert days[f"{PANES}_3600s"] == ["2025-03-03", "2025-03-05"]


def test_a_window_without_samples_retires_nothing_since_retention_counts_from_the_newest_sample(
    tmp_path: Path,
) -> None:
    """The clock's window over a fleet seen only through day-old samples holds no sample: it
    once expired by the wall clock, retiring the minutes of the replayed day (after midnight
    UTC, the day before yesterday's share of them)."""
    from warehouse.storage.segments import read_manifest

    store = QuantileStore(tmp_path / "sketches", retention_s={10: 3600.0, 60: 3600.0})
    old = Fleet()
    old.gpus("a", "h1", range(1), 0, 30, gpu_util=util)
    keep(store, old, Window(T0, T0 + timedelta(days=1)))
    before = read_manifest(store.root).tables
    keep(store, old, Window(T0 + timedelta(days=3), T0 + timedelta(days=3, hours=1)))
    assert read_manifest(store.root).tables == before


def test_a_window_behind_the_marks_rebuilds_its_range_from_what_is_stored_now(
    fleet: Fleet, tmp_path: Path
) -> None:
    """Late data (a spool replayed after an outage, a day-old import, an out-of-order Celery
    window or a backfill) arrives for panes already built: the window that re-analyses them lies
    behind the marks, and its range is rebuilt from the samples stored now, never appended twice."""
    store = QuantileStore(tmp_path / "sketches")
    partial = Fleet()
    partial.gpus("a", "h1", range(2), 0, 150, gpu_util=util)
    partial.gpus("b", "h2", range(1), 20, 40, gpu_util=lambda i, t: 10.0 + i % 3)  # 60 min late
    partial.gpus(None, "h3", range(1), 0, 150, gpu_util=0.0)
    partial.host("h1", 0, 150, job="a")
    keep(store, partial, Window(T0, T0 + timedelta(minutes=150)))
    assert rows(store, PANES)[0] == (10, len(partial.gpu_rows))

    # the replay lands: the scheduler re-runs the first hour's bucket (arrival-owed)
    keep(store, fleet, Window(T0, T0 + timedelta(minutes=60)))
    keep(store, fleet, Window(T0 + timedelta(minutes=60), T0 + timedelta(minutes=120)))
    two_hours = sum(r["ts"] < T0 + timedelta(hours=2) for r in fleet.gpu_rows)
    late = sum(r["ts"] >= T0 + timedelta(hours=2) for r in fleet.gpu_rows) - sum(
        r["ts"] >= T0 + timedelta(hours=2) for r in partial.gpu_rows
    )
    assert late == 0  # this fleet's late rows all fall in the first two hours
    assert rows(store, PANES) == [
        (10, len(fleet.gpu_rows)),
        (60, len(fleet.gpu_rows)),
        (3600, two_hours),
    ]
    conn = store.connect()
    by_job = group_sketches(conn, "gpu_util_pct", ["job_id"], T0, T0 + timedelta(hours=3))
    assert same(by_job["b",], exact(fleet, 0, 150, "b"))
    assert_ranges_exact(conn, fleet, [(0, 150), (30.5, 125), (0, 60), (59, 121)])
    conn.close()


def test_a_fleet_first_seen_now_gets_panes_for_its_day_old_samples(
    fleet: Fleet, tmp_path: Path
) -> None:
    """The scheduler's first tick on a new warehouse runs the current bucket before the buckets
    the arrival marks owe: the older buckets, run after, still get their panes."""
    store = QuantileStore(tmp_path / "sketches")
    keep(store, fleet, Window(T0 + timedelta(hours=26), T0 + timedelta(hours=26, minutes=5)))
    for hour in (0, 1, 2):
        start = T0 + timedelta(hours=hour)
        keep(store, fleet, Window(start, start + timedelta(hours=1)))
    samples = len(fleet.gpu_rows)  # the third hour's window ends on the hour: whole
    assert rows(store, PANES) == [(10, samples), (60, samples), (3600, samples)]
    conn = store.connect()
    (fleet_sketch,) = group_sketches(conn, "gpu_util_pct", [], T0, T0 + timedelta(hours=3)).values()
    assert same(fleet_sketch, exact(fleet, 0, 180))
    conn.close()


def test_a_rebuild_of_one_partition_leaves_the_others_rows_alone(
    fleet: Fleet, tmp_path: Path
) -> None:
    store = QuantileStore(tmp_path / "sketches")
    for partition in (0, 1):
        keep(store, fleet, Window(T0, T0 + timedelta(minutes=150), partition, 2))
    before = rows(store, PANES)
    for partition in (1, 0, 1):  # each re-run behind its marks rebuilds its own rows only
        keep(store, fleet, Window(T0, T0 + timedelta(minutes=60), partition, 2))
    assert rows(store, PANES) == before
    conn = store.connect()
    (all_values,) = group_sketches(conn, "gpu_util_pct", [], T0, T0 + timedelta(hours=3)).values()
    assert same(all_values, exact(fleet, 0, 180))
    conn.close()
