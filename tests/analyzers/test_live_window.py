"""The live window (issue 31): under the default schedule (`scheduler.interval_s` 60 s,
`analyzers.lateness_s` 120 s) a tick analyses the live bucket up to the newest sample every
reporting cluster has delivered, per the arrival marks, instead of waiting out the lateness; a
cluster silent for longer than the lateness does not hold it back. Real SQLite catalog, real
DuckDB, the writer's real commit hook."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import duckdb
import pytest

from analyzers.run.results import FindingStore
from analyzers.run.runner import Pipeline
from analyzers.run.schedule import due_windows, run_due
from simulator.maker.series import T0, Fleet
from warehouse import catalog
from warehouse.catalog.arrivals import Arrival, record_arrivals
from warehouse.storage.arrival_hook import ArrivalMarks

from .test_arrival_schedule import IDLE, KW, Clock, land

MS = timedelta(milliseconds=1)


@pytest.fixture
def store(tmp_path: Path) -> FindingStore:
    return FindingStore(catalog.connect(f"sqlite:///{tmp_path / 'catalog.sqlite'}"))


def test_r1_is_found_at_the_first_tick_after_its_300_s_of_data_arrived(
    store: FindingStore, tmp_path: Path
) -> None:
    path = tmp_path / "telemetry.duckdb"
    # an idle job's first 6 minutes (samples every 10 s, the last at 5:50), committed at 6:05
    wall = Clock(T0 + timedelta(minutes=6, seconds=5))
    marks = ArrivalMarks(store.engine, 86400, clock=wall)
    land(Fleet().gpus("idle", "h1", range(2), 0, 6, **IDLE), path, marks, 0)

    def connect() -> duckdb.DuckDBPyConnection:
        return duckdb.connect(str(path), read_only=True)

    tick = T0 + timedelta(minutes=7)  # the next tick of the default 60 s schedule
    results = run_due(Pipeline.default(), store, connect, tick, live=True, **KW)
    # the lateness alone would end the window at 5:00, before R1's 300 s of data
    assert [(r.window.start, r.window.end) for r in results] == [
        (T0, T0 + timedelta(minutes=5, seconds=50) + MS)
    ]
    # only the settled part (the lateness bound) is kept as quantile panes
    assert [r.window.settled_end for r in results] == [T0 + timedelta(minutes=5)]
    assert {(s.finding.rule_id, s.finding.job_id) for s in store.findings()} >= {("R1", "idle")}
    # nothing new arrived: the next tick's window ends where the lateness bound has moved on to
    later = run_due(
        Pipeline.default(), store, connect, tick + timedelta(minutes=1), live=True, **KW
    )
    assert [r.window.end for r in later] == [T0 + timedelta(minutes=6)]


def test_celery_ticks_keep_the_lateness_bound(store: FindingStore, tmp_path: Path) -> None:
    """Celery's window tasks carry no settled end, so its windows stop at the lateness bound."""
    wall = Clock(T0 + timedelta(minutes=6, seconds=5))
    marks = ArrivalMarks(store.engine, 86400, clock=wall)
    land(Fleet().gpus("idle", "h1", range(1), 0, 6, **IDLE), tmp_path / "t.duckdb", marks, 0)
    due = due_windows(store, T0 + timedelta(minutes=7), **KW)
    assert [(d.window.end, d.window.settled_end) for d in due] == [
        (T0 + timedelta(minutes=5), None)
    ]


def test_a_cluster_silent_past_the_lateness_does_not_hold_the_live_window_back(
    store: FindingStore,
) -> None:
    def arrive(cluster: str, through_s: float, at_s: float) -> None:
        with store.engine.begin() as conn:
            at, through = T0 + timedelta(seconds=at_s), T0 + timedelta(seconds=through_s)
            record_arrivals(conn, [Arrival(T0, cluster, at, T0, through)])

    arrive("a", 590, 595)
    arrive("b", 560, 570)  # b delivers more slowly: the window waits for it
    assert store.arrived_through(T0 + timedelta(seconds=480)) == T0 + timedelta(seconds=560)
    arrive("b", 575, 590)
    assert store.arrived_through(T0 + timedelta(seconds=480)) == T0 + timedelta(seconds=575)
    # b stops: two minutes after its last commit it no longer counts
    arrive("a", 710, 715)
    assert store.arrived_through(T0 + timedelta(seconds=600)) == T0 + timedelta(seconds=710)
    # nobody committed in the last two minutes: the lateness bound decides alone
    assert store.arrived_through(T0 + timedelta(seconds=900)) is None


def test_a_late_sample_after_the_live_run_reopens_nothing_lost(
    store: FindingStore, tmp_path: Path
) -> None:
    """A host whose rows arrive after the live window ran them past: its bucket's arrival mark is
    newer than what was analysed, so the next tick re-runs the bucket with them."""
    path = tmp_path / "telemetry.duckdb"
    wall = Clock(T0 + timedelta(minutes=6, seconds=5))
    marks = ArrivalMarks(store.engine, 86400, clock=wall)
    land(Fleet().gpus("busy", "h1", range(1), 0, 6), path, marks, 0)

    def connect() -> duckdb.DuckDBPyConnection:
        return duckdb.connect(str(path), read_only=True)

    tick = T0 + timedelta(minutes=7)
    run_due(Pipeline.default(), store, connect, tick, live=True, **KW)
    assert ("R1", "late") not in {(s.finding.rule_id, s.finding.job_id) for s in store.findings()}
    wall.at = tick + timedelta(seconds=20)  # h2's first 6 minutes arrive late
    land(Fleet().gpus("late", "h2", range(1), 0, 6, **IDLE), path, marks, 1)
    run_due(Pipeline.default(), store, connect, tick + timedelta(minutes=1), live=True, **KW)
    assert ("R1", "late") in {(s.finding.rule_id, s.finding.job_id) for s in store.findings()}
