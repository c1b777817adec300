"""The sharing plan stored by the scheduled analyzer pass (issue 31): the embedded scheduler's tick
and `fleetscope analyze` store it after their windows land, `fleetscope plan sharing` prints the
same numbers for the stored window, a plan is renewed once per step and never replaced by an
older one, a page is answered only by a plan of its own window, and a catalog from before the
table still opens. Real published segments, real DuckDB, real SQLite catalog."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest
from sqlalchemy import Engine, text

from analyzers.run.schedule import start_embedded
from analyzers.sharing.stored import (
    KIND,
    PlanStep,
    plan_window,
    read_stored,
    shown_for,
    store_due_plan,
)
from app.cli import main
from fleetscope.settings import load_settings
from simulator.maker.series import T0
from simulator.maker.tables import publish
from tests.analyzers.test_sharing import _known_fleet
from warehouse import catalog
from warehouse.catalog.plans import StoredPlan, record_plan

WEEK_S = 7 * 86400.0
NEWEST = T0 + timedelta(days=1) - timedelta(seconds=60)  # the known fleet's last sample
STEP = PlanStep(days=7.0, every_s=3600.0, slack_s=180.0)


def rounded(value: Any) -> Any:
    """`value` with every float to 9 significant digits: DuckDB's parallel sums may add in another
    order from one read to the next (the last bits of a mean), never more."""
    if isinstance(value, float):
        return float(f"{value:.9g}")
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


def _telemetry(path: Path) -> Path:
    _known_fleet().connect(path).close()
    return path


def _reader(path: Path) -> Callable[[datetime, datetime], duckdb.DuckDBPyConnection]:
    return lambda _start, _end: duckdb.connect(str(path), read_only=True)


def test_the_embedded_scheduler_stores_the_plan_after_its_windows(tmp_path: Path) -> None:
    path = _telemetry(tmp_path / "telemetry.duckdb")

    @dataclass
    class Source:  # what the server's Warehouse offers: a cursor and the catalog
        catalog: Engine

        def cursor(self) -> duckdb.DuckDBPyConnection:
            return duckdb.connect(str(path), read_only=True)

    engine = catalog.connect(f"sqlite:///{tmp_path / 'catalog.sqlite'}")
    settings = load_settings(env={}).with_overrides(core__data_dir=str(tmp_path / "var"))
    stop = start_embedded(settings, Source(engine), clock=lambda: T0 + timedelta(days=1, hours=1))
    try:
        deadline = time.monotonic() + 120
        while read_stored(engine, WEEK_S) is None and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop()
    stored = read_stored(engine, WEEK_S)
    assert stored is not None, "the tick stored no sharing plan"
    # the last 7 days to just past the newest sample: the window the Sharing page opens on
    window = plan_window(NEWEST + timedelta(milliseconds=1), WEEK_S)
    assert (stored.window_start, stored.window_end) == (window.start, window.end)
    assert stored.document["gpus_freed"] == 3
    assert [g["mechanism"] for g in stored.document["groups"]] == ["mig", "mps"]
    assert len(stored.document["rows"]) == 5  # the page's table: one row per job GPU


def test_fleetscope_analyze_stores_it_and_plan_sharing_prints_the_same_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publish(_known_fleet(), tmp_path / "var" / "segments")
    config = tmp_path / "fleetscope.toml"
    config.write_text(f'[core]\ndata_dir = "{tmp_path / "var"}"\n')
    at = (T0 + timedelta(days=1, hours=1)).isoformat()
    assert main(["--config", str(config), "analyze", "--at", at]) == 0
    assert "sharing plan stored: " in capsys.readouterr().out
    engine = catalog.connect(f"sqlite:///{tmp_path / 'var' / 'catalog.sqlite'}")
    stored = read_stored(engine, WEEK_S)
    assert stored is not None
    days = (stored.window_end - stored.window_start).total_seconds() / 86400
    argv = ["--config", str(config), "plan", "sharing", "--format", "json"]
    assert main([*argv, "--days", f"{days}", "--end", stored.window_end.isoformat()]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert rounded({k: v for k, v in stored.document.items() if k != "rows"}) == rounded(cli)
    assert cli["gpus_freed"] == 3


def test_a_plan_is_renewed_once_per_step_and_never_by_an_older_one(tmp_path: Path) -> None:
    path = _telemetry(tmp_path / "telemetry.duckdb")
    engine = catalog.connect(f"sqlite:///{tmp_path / 'catalog.sqlite'}")
    early = NEWEST - timedelta(hours=5)
    first = store_due_plan(engine, _reader(path), early, STEP)
    assert first is not None and first.end == early
    # within the step: not due, nothing read
    assert store_due_plan(engine, _reader(path), early + timedelta(minutes=30), STEP) is None
    # a backfill of an older bucket never replaces the newer plan
    with engine.begin() as conn:
        assert not record_plan(conn, KIND, WEEK_S, T0, T0 + timedelta(hours=1), {"old": True})
    # a step later it is renewed, up to just past the newest sample whatever the pass's end
    later = store_due_plan(engine, _reader(path), NEWEST + timedelta(hours=2), STEP)
    assert later is not None and later.end == NEWEST + timedelta(milliseconds=1)
    # a warehouse that stopped receiving samples: the plan of its newest sample is not redone
    assert store_due_plan(engine, _reader(path), NEWEST + timedelta(hours=9), STEP) is None
    stored = read_stored(engine, WEEK_S)
    assert stored is not None and stored.window_end == later.end


def _plan(end_offset: timedelta, window_s: float = WEEK_S) -> StoredPlan:
    end = NEWEST + timedelta(milliseconds=1) + end_offset
    window = plan_window(end, window_s)
    return StoredPlan(KIND, window_s, window.start, window.end, end, {"gpus_freed": 1})


def test_a_page_is_answered_only_by_a_plan_of_its_own_window() -> None:
    page_end, week = NEWEST + timedelta(milliseconds=1), timedelta(days=7)
    assert shown_for(_plan(timedelta(0)), page_end, week, STEP) is not None
    # the newest plan a step (plus the lateness and a tick) behind the window's end: still it
    assert shown_for(_plan(-timedelta(minutes=62)), page_end, week, STEP) is not None
    # older than that, a plan of another length, or one past the window's end: not this window
    assert shown_for(_plan(-timedelta(hours=2)), page_end, week, STEP) is None
    assert shown_for(_plan(timedelta(0), 86400.0), page_end, timedelta(days=1) * 7, STEP) is None
    assert shown_for(_plan(timedelta(0), 86400.0), page_end, timedelta(days=1), STEP) is not None
    assert shown_for(_plan(timedelta(minutes=5)), page_end, week, STEP) is None
    assert shown_for(None, page_end, week, STEP) is None


def test_a_catalog_from_before_the_table_opens_and_means_no_stored_plan(tmp_path: Path) -> None:
    import sqlalchemy

    url = f"sqlite:///{tmp_path / 'catalog.sqlite'}"
    catalog.connect(url).dispose()
    old = sqlalchemy.create_engine(url)
    with old.begin() as conn:  # as an older build left it
        conn.execute(text("DROP TABLE stored_plans"))
    assert read_stored(old, WEEK_S) is None  # a reader's plain engine: nothing stored
    engine = catalog.connect(url)  # the server's, Celery's or the CLI's: creates the table
    assert read_stored(engine, WEEK_S) is None  # empty: no stored plan yet
    assert store_due_plan(engine, _reader(_telemetry(tmp_path / "t.duckdb")), NEWEST, STEP)
    assert read_stored(old, WEEK_S) is not None
