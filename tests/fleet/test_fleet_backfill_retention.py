"""Fleet mode: `fleetscope backfill` skips a day whose raw GPU samples retention dropped from the
Iceberg tables (real gateway, PostgreSQL catalog, S3 server, the real upkeep retention), re-runs
the days within retention, and runs here only with --celery (no local telemetry to read)."""

from __future__ import annotations

import argparse
from datetime import UTC, date, datetime, timedelta

import pyarrow as pa
import pytest

from analyzers.cli import cmd_analyze, cmd_backfill
from analyzers.run.backfill import plan_backfill
from analyzers.run.schedule import backfill_windows
from analyzers.run.window import Window
from fleetscope.errors import ConfigError
from fleetscope.settings import Settings
from simulator.maker.batches import EPOCH_MS, gpu_batch
from simulator.wire import TEST_TOKEN, post_batch
from tests.fleet.conftest import landed
from warehouse.fleet import upkeep
from warehouse.fleet.gateway import Gateway

DAY = timedelta(days=1)
T0 = datetime.fromtimestamp(EPOCH_MS / 1000, UTC)
NOW = T0 + 2 * DAY + timedelta(hours=1)  # day 0 is past a one-day raw retention, day 1 is not
DAY_MS = 86_400_000


def post(gw: Gateway, *batches: pa.Table) -> None:
    for batch in batches:
        assert post_batch(gw.url, "gpu_samples", batch, token=TEST_TOKEN).status == 202
        landed(gw)  # committed: one data file per batch, as upkeep's tests expect


def planned(settings: Settings, rerun_retired: bool = False) -> tuple[list[date], list[str]]:
    """The days a backfill of days 0 and 1 runs, and each retired bucket's reason."""
    windows = backfill_windows(T0, T0 + 2 * DAY, 86400, partitions=1)
    plan = plan_backfill(settings, windows, rerun_retired=rerun_retired)
    return [w.start.date() for w in plan.windows], [b.why() for b in plan.retired]


def dropped(day: date, samples: str) -> str:
    return (
        f"{day.isoformat()}: retention dropped raw GPU samples that only the hourly roll-ups "
        f"keep ({samples})"
    )


def test_a_day_retention_dropped_is_skipped_in_fleet_mode_and_re_run_only_when_asked(
    gateway: Gateway, fleet_settings: Settings
) -> None:
    tables = gateway.writer.tables
    day0, day1 = T0.date(), (T0 + DAY).date()
    post(gateway, gpu_batch("h1", cluster="c1"), gpu_batch("h1", start_ms=EPOCH_MS + DAY_MS))
    post(gateway, gpu_batch("h2", cluster="c2", gpus=2))
    assert planned(fleet_settings) == ([day0, day1], [])

    # a retention that died between its roll-up and its delete left every raw sample
    (c1,) = [p for p in upkeep.partitions(tables, "gpu_samples") if p.cluster == "c1"]
    assert upkeep.roll_up(tables, c1) == 8
    assert planned(fleet_settings) == ([day0, day1], [])

    assert [(p.day, p.cluster) for p in upkeep.retention(tables, "gpu_samples", 1, NOW)] == [
        (day0, "c1"),
        (day0, "c2"),
    ]
    assert planned(fleet_settings) == ([day1], [dropped(day0, "c1: 80, c2: 20")])

    # samples of day 0 that arrive after retention are no raw record of what it dropped
    post(gateway, gpu_batch("h1", start_ms=EPOCH_MS + 60_000, cluster="c1", timestamps=100))
    assert planned(fleet_settings) == ([day1], [dropped(day0, "c1: 80, c2: 20")])

    assert planned(fleet_settings, rerun_retired=True) == (
        [day0, day1],
        [dropped(day0, "c1: 80, c2: 20")],
    )


def test_a_backfill_here_in_fleet_mode_is_refused_before_it_replaces_findings(
    fleet_settings: Settings,
) -> None:
    args = argparse.Namespace(
        start=T0.isoformat(), end=(T0 + DAY).isoformat(), celery=False, rerun_retired=False
    )
    with pytest.raises(ConfigError, match="fleet mode: run `fleetscope backfill` with --celery"):
        cmd_backfill(args, fleet_settings)


def test_analyze_here_in_fleet_mode_is_refused_before_it_replaces_findings(
    fleet_settings: Settings,
) -> None:
    """`fleetscope analyze` runs due windows in this process on the embedded warehouse, which a
    fleet does not have: it would store no findings for them and move the watermark on."""
    with pytest.raises(ConfigError, match="fleet mode: due windows are analysed by the Celery"):
        cmd_analyze(argparse.Namespace(at=None), fleet_settings)


def test_no_retention_yet_means_nothing_retired(fleet_settings: Settings) -> None:
    """A fleet whose upkeep never ran has no roll-up table: every bucket is re-run."""
    window = Window(T0, T0 + DAY)
    assert plan_backfill(fleet_settings, [window]).windows == [window]
