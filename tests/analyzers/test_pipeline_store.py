"""The runner, the store and the schedule together: idempotent re-runs, stale findings removed,
acknowledgement and suppression kept, watermarks and catch-up, the ranking without double counts.
Real SQLite catalog files and real DuckDB."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from analyzers.base import JobInfo, StaticJobCatalog
from analyzers.findings import Finding
from analyzers.reports.ranking import rank
from analyzers.run.results import FindingStore
from analyzers.run.runner import Pipeline
from analyzers.run.schedule import (
    WATERMARK_KEY,
    backfill_windows,
    data_end,
    pending_windows,
    run_due,
    schedule_time,
)
from analyzers.run.window import Window
from simulator.maker.series import T0, Fleet
from warehouse import catalog

IDLE = {"gpu_util": 0.0, "gr_engine_active": 0.0, "sm_active": 0.0, "tensor_active": 0.0}
CATALOG = StaticJobCatalog(
    [JobInfo("idle", "ann", "vision", "resnet-sweep", "resnet50"), JobInfo("low", "bo", "nlp")]
)


@pytest.fixture
def store(tmp_path: Path) -> FindingStore:
    return FindingStore(catalog.connect(f"sqlite:///{tmp_path / 'catalog.sqlite'}"))


def fleet() -> Fleet:
    return (
        Fleet()
        .gpus("idle", "h1", range(2), 0, 180, **IDLE)
        .gpus("low", "h2", range(1), 0, 180, gpu_util=10.0)
        .gpus("ok", "h3", range(1), 0, 180)
    )


def ids(store: FindingStore) -> list[tuple[str, str | None]]:
    return sorted((s.finding.rule_id, s.finding.job_id) for s in store.findings())


def test_rerunning_a_window_updates_instead_of_duplicating(store: FindingStore) -> None:
    conn, pipeline = fleet().connect(), Pipeline.default()
    window = Window(T0, T0 + timedelta(days=1))
    first = pipeline.run(conn, window, CATALOG, store)
    again = pipeline.run(conn, window, CATALOG, store)
    assert not first.errors and not again.errors
    assert sorted(f.finding_id for f in first.findings) == sorted(
        f.finding_id for f in again.findings
    )
    # "low"'s under-utilized profile (R11) is a symptom of its low utilization (analyzers.rules.causes)
    assert ids(store) == [("R1", "idle"), ("R2", "low"), ("R3", "idle")]
    (low,) = store.findings(job_id="low")
    assert [s["rule_id"] for s in low.finding.evidence["symptoms"]] == ["R11"]
    stored = {s.finding.rule_id: s.finding for s in store.findings(job_id="idle")}
    assert (stored["R1"].user, stored["R1"].team, stored["R1"].job_name) == (
        "ann",
        "vision",
        "resnet-sweep",
    )
    assert stored["R1"].evidence["samples_n"] == 2160
    assert len(store.runs()) == 2 * len(pipeline.analyzers)


def test_a_condition_that_stops_holding_is_removed_unless_acknowledged(
    store: FindingStore,
) -> None:
    pipeline = Pipeline.default()
    early = Window(T0, T0 + timedelta(minutes=90))
    # "low" is at 10 % for its first 90 minutes, then busy: by 3 h its mean passes 25 %
    f = Fleet().gpus(
        "low", "h2", range(1), 0, 180, gpu_util=lambda i, t: 10.0 if t < 5400 else 95.0
    )
    f.gpus("low2", "h4", range(1), 0, 180, gpu_util=lambda i, t: 10.0 if t < 5400 else 95.0)
    conn = f.connect()
    pipeline.run(conn, early, CATALOG, store)
    r2 = {s.finding.job_id: s.finding.finding_id for s in store.findings(rule_id="R2")}
    store.set_state(r2["low2"], "acknowledged")
    pipeline.run(conn, Window(T0, T0 + timedelta(minutes=180)), CATALOG, store)
    left = [(s.finding.job_id, s.state) for s in store.findings(rule_id="R2")]
    assert left == [("low2", "acknowledged")]


def test_suppressions_by_user_rule_or_job_hide_findings_and_survive_reruns(
    store: FindingStore,
) -> None:
    conn, pipeline = fleet().connect(), Pipeline.default()
    window = Window(T0, T0 + timedelta(days=1))
    pipeline.run(conn, window, CATALOG, store)
    store.suppress("user", "bo", reason="known: a debugging session")
    store.suppress("rule", "R3")
    pipeline.run(conn, window, CATALOG, store)
    assert ids(store) == [("R1", "idle")]
    every = store.findings(include_suppressed=True)
    assert sorted(s.state for s in every) == ["open", "suppressed", "suppressed"]


def test_ranking_counts_one_job_once_and_groups_by_team() -> None:
    conn = fleet().connect()
    found = Pipeline.default().run(conn, Window(T0, T0 + timedelta(days=1)), CATALOG).findings
    report = rank(found, by="team", catalog=CATALOG)
    by_rule = {x.key: x.gpu_hours for x in report.by_rule}
    assert by_rule["R1"] == pytest.approx(6.0) and by_rule["R3"] == pytest.approx(6.0)
    # idle: 6 GPU-h once (R1 and R3 overlap); low: max(R2 2.7, R11 2.7) = 2.7
    assert report.total_gpu_hours == pytest.approx(6.0 + 3 * 0.9)
    assert [(x.key, round(x.gpu_hours, 2)) for x in report.by_group] == [
        ("vision", 6.0),
        ("nlp", 2.7),
    ]
    assert report.top_jobs[0].key == "idle"
    assert rank(found, by="model", catalog=CATALOG).by_group[0].key == "resnet50"


def test_windows_come_from_the_schedule_time_not_the_clock() -> None:
    t = T0 + timedelta(hours=5, minutes=7, seconds=41)
    tick = schedule_time(t, 60)
    assert (
        tick == schedule_time(t + timedelta(seconds=18), 60) == T0 + timedelta(hours=5, minutes=7)
    )
    end = data_end(tick, 120, 60)
    assert end == T0 + timedelta(hours=5, minutes=5)
    (w,) = pending_windows(None, end, 86400)
    assert (w.start, w.end) == (T0, end)
    # after downtime, the watermark's bucket is finished before today's
    late = pending_windows(T0 + timedelta(hours=20), end + timedelta(days=1), 86400)
    assert [(x.start, x.end) for x in late] == [
        (T0, T0 + timedelta(days=1)),
        (T0 + timedelta(days=1), end + timedelta(days=1)),
    ]
    assert len(backfill_windows(T0, T0 + timedelta(days=2), 86400, partitions=3)) == 6


def test_run_due_advances_the_watermark_and_is_idempotent(
    store: FindingStore, tmp_path: Path
) -> None:
    path = tmp_path / "telemetry.duckdb"
    fleet().connect(path).close()
    import duckdb

    def connect() -> duckdb.DuckDBPyConnection:
        return duckdb.connect(str(path), read_only=True)

    tick = T0 + timedelta(hours=4)
    kwargs = {"bucket_s": 86400.0, "lateness_s": 120.0, "interval_s": 60.0}
    (result,) = run_due(Pipeline.default(), store, connect, tick, **kwargs)
    assert result.window.end == T0 + timedelta(hours=3, minutes=58)
    assert store.watermark(WATERMARK_KEY, "0/1") == result.window.end
    assert run_due(Pipeline.default(), store, connect, tick, **kwargs) == []
    assert ids(store) == [("R1", "idle"), ("R2", "low"), ("R3", "idle")]


def test_partitions_cover_the_fleet_exactly_once() -> None:
    conn, pipeline = fleet().connect(), Pipeline.default()
    whole = pipeline.run(conn, Window(T0, T0 + timedelta(days=1)), CATALOG).findings
    parts: list[Finding] = []
    for p in range(3):
        parts += pipeline.run(conn, Window(T0, T0 + timedelta(days=1), p, 3), CATALOG).findings
    assert sorted(f.finding_id for f in parts) == sorted(f.finding_id for f in whole)


def test_the_embedded_scheduler_thread_runs_due_windows_and_stops(tmp_path: Path) -> None:
    import time
    from dataclasses import dataclass

    import duckdb
    from sqlalchemy import Engine

    from analyzers.run.schedule import start_embedded
    from fleetscope.settings import load_settings

    path = tmp_path / "telemetry.duckdb"
    fleet().connect(path).close()

    @dataclass
    class Source:  # what the server's Warehouse offers: a cursor and the catalog
        catalog: Engine

        def cursor(self) -> duckdb.DuckDBPyConnection:
            return duckdb.connect(str(path), read_only=True)

    engine = catalog.connect(f"sqlite:///{tmp_path / 'catalog.sqlite'}")
    settings = load_settings(env={}).with_overrides(core__data_dir=str(tmp_path / "var"))
    stop = start_embedded(settings, Source(engine), clock=lambda: T0 + timedelta(hours=4))
    store = FindingStore(engine)
    try:
        deadline = time.monotonic() + 60
        while store.watermark(WATERMARK_KEY, "0/1") is None and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop()
    assert store.watermark(WATERMARK_KEY, "0/1") == T0 + timedelta(hours=3, minutes=58)
    assert ids(store) == [("R1", "idle"), ("R2", "low"), ("R3", "idle")]
