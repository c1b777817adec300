"""Arrival-driven scheduling (issue 13): a bucket that receives data is analysed whatever its age,
late data re-opens it, findings stay idempotent, and buckets beyond the re-open bound are
reported, not run. Real SQLite catalog, real DuckDB, the writer's real commit hook."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from analyzers.run.results import FindingStore
from analyzers.run.runner import Pipeline
from analyzers.run.schedule import run_due
from simulator.maker.series import T0, Fleet
from warehouse import catalog
from warehouse.storage.arrival_hook import ArrivalMarks
from warehouse.storage.writer import Commit

IDLE = {"gpu_util": 0.0, "gr_engine_active": 0.0, "sm_active": 0.0, "tensor_active": 0.0}
DAY = timedelta(days=1)
KW = {"bucket_s": 86400.0, "lateness_s": 120.0, "interval_s": 60.0, "reopen_max_age_s": 7 * 86400.0}


class Clock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


@pytest.fixture
def store(tmp_path: Path) -> FindingStore:
    return FindingStore(catalog.connect(f"sqlite:///{tmp_path / 'catalog.sqlite'}"))


def land(fleet: Fleet, path: Path, marks: ArrivalMarks, seq: int) -> None:
    """What the writer does: commit the rows, then run the commit hook on what it committed."""
    tables = fleet.tables()
    with duckdb.connect(str(path)) as conn:
        for name, table in tables.items():
            conn.register("_load", table)
            conn.execute(f"CREATE TABLE IF NOT EXISTS {name} AS SELECT * FROM _load LIMIT 0")
            conn.execute(f"INSERT INTO {name} BY NAME SELECT * FROM _load")
            conn.unregister("_load")
    marks(Commit(seq, tables, []))


def rules(store: FindingStore) -> list[tuple[str, str | None, str]]:
    return sorted(
        (s.finding.rule_id, s.finding.job_id, f"{s.finding.window_start:%Y-%m-%d}")
        for s in store.findings()
    )


def test_a_day_old_replay_is_analysed_at_the_next_tick_and_late_data_reopens_it(
    store: FindingStore, tmp_path: Path
) -> None:
    path = tmp_path / "telemetry.duckdb"
    wall = Clock(T0 + DAY + timedelta(hours=6))  # the server's clock: the day after the data
    marks = ArrivalMarks(store.engine, 86400, clock=wall)

    def connect() -> duckdb.DuckDBPyConnection:
        return duckdb.connect(str(path), read_only=True)

    tick = T0 + DAY + timedelta(hours=6)
    land(Fleet(), path, marks, 0)
    # the scheduler has been running: today's clock window is done, yesterday was empty
    assert [r.window.start for r in run_due(Pipeline.default(), store, connect, tick, **KW)] == [
        T0 + DAY
    ]
    # a replay of yesterday lands (exposition timestamps a day old)
    replay = Fleet().gpus("idle", "h1", range(2), 0, 180, **IDLE)
    land(replay, path, marks, 1)
    wall.at = tick = tick + timedelta(minutes=1)
    results = run_due(Pipeline.default(), store, connect, tick, **KW)
    assert [(r.window.start, r.window.end) for r in results] == [
        (T0 + DAY, tick - timedelta(minutes=2)),
        (T0, T0 + DAY),
    ]
    assert rules(store) == [("R1", "idle", "2025-03-03"), ("R3", "idle", "2025-03-03")]
    first_ids = sorted(s.finding.finding_id for s in store.findings())
    # nothing new arrived: the old bucket is not run again
    tick += timedelta(minutes=1)
    assert [r.window.start for r in run_due(Pipeline.default(), store, connect, tick, **KW)] == [
        T0 + DAY
    ]
    # late data for the same bucket re-opens it; the same findings are updated, not duplicated
    late = Fleet().gpus("low", "h2", range(1), 0, 180, gpu_util=10.0)
    wall.at = tick + timedelta(seconds=5)
    land(late, path, marks, 2)
    tick += timedelta(minutes=1)
    starts = [r.window.start for r in run_due(Pipeline.default(), store, connect, tick, **KW)]
    assert starts == [T0 + DAY, T0]
    assert [r for r in rules(store) if r[1] == "idle"] == [
        ("R1", "idle", "2025-03-03"),
        ("R3", "idle", "2025-03-03"),
    ]
    assert set(first_ids) <= {s.finding.finding_id for s in store.findings()}
    assert ("R2", "low", "2025-03-03") in rules(store)


def test_data_older_than_the_reopen_bound_is_skipped_and_reported(
    store: FindingStore, tmp_path: Path
) -> None:
    path = tmp_path / "telemetry.duckdb"
    wall = Clock(T0 + 10 * DAY)
    land(
        Fleet().gpus("idle", "h1", range(1), 0, 180, **IDLE),
        path,
        ArrivalMarks(store.engine, 86400, clock=wall),
        1,
    )

    def connect() -> duckdb.DuckDBPyConnection:
        return duckdb.connect(str(path), read_only=True)

    tick = T0 + 10 * DAY + timedelta(hours=1)
    starts = [r.window.start for r in run_due(Pipeline.default(), store, connect, tick, **KW)]
    assert starts == [T0 + 10 * DAY]
    assert store.findings() == []
    assert store.skipped_buckets() == [("0/1", T0, T0 + 10 * DAY)]
    # reported once, not retried every tick
    tick += timedelta(minutes=1)
    assert [r.window.start for r in run_due(Pipeline.default(), store, connect, tick, **KW)] == [
        T0 + 10 * DAY
    ]


@pytest.mark.parametrize(
    ("reopen_days", "retention_days", "bound_days"),
    [(7, 14, 7), (30, 14, 14), (0, 14, 14), (7, 0, 7), (0, 0, 0)],
)
def test_late_data_reopens_no_bucket_past_raw_retention(
    reopen_days: float, retention_days: int, bound_days: float
) -> None:
    """A day retention retired holds only its late rows: re-analysed alone they would replace
    its findings, so the bound is never past `warehouse.raw_retention_days` (0: no bound)."""
    from analyzers.run.schedule import reopen_bound_s
    from fleetscope.settings import load_settings

    settings = load_settings(env={}).with_overrides(
        analyzers__reopen_max_age_s=reopen_days * 86400.0,
        warehouse__raw_retention_days=retention_days,
    )
    assert reopen_bound_s(settings) == bound_days * 86400.0


def test_the_commit_hook_marks_each_bucket_and_cluster_its_rows_fall_in(
    store: FindingStore,
) -> None:
    from warehouse.catalog.arrivals import owed

    fleet = Fleet().gpus("a", "h1", range(1), 23 * 60, 120)  # 23:00 to 01:00 next day
    at = datetime(2030, 1, 1, tzinfo=UTC)
    ArrivalMarks(store.engine, 86400, clock=Clock(at))(Commit(1, fleet.tables(), []))
    with store.engine.connect() as conn:
        got = [(o.bucket_start, o.arrival_at, o.analysed_at) for o in owed(conn, "0/1")]
    assert got == [(T0, at, None), (T0 + DAY, at, None)]


def test_skipped_buckets_are_a_gauge_and_a_cli_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from app.cli import main
    from warehouse.ingest.metrics import ArrivalCollector

    config = tmp_path / "fleetscope.toml"
    config.write_text(f'[core]\ndata_dir = "{tmp_path / "var"}"\n')
    (tmp_path / "var").mkdir()  # a server's data folder (the CLI refuses a missing one)
    store = FindingStore(catalog.connect(f"sqlite:///{tmp_path / 'var' / 'catalog.sqlite'}"))
    assert main(["--config", str(config), "analyzers", "--skipped"]) == 0
    assert "no bucket skipped" in capsys.readouterr().out
    store.mark_bucket("0/1", T0, T0 + 10 * DAY, "skipped")
    assert main(["--config", str(config), "analyzers", "--skipped"]) == 0
    assert capsys.readouterr().out == (
        "2025-03-03T00:00:00+00:00  partition 0/1  data arrived 2025-03-13T00:00:00+00:00\n"
    )
    registry = CollectorRegistry()
    registry.register(ArrivalCollector(store.engine))
    assert "fleetscope_analyzer_buckets_skipped 1.0" in generate_latest(registry).decode()
