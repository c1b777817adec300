"""Arrival marks in fleet mode (issue 13 on the gateways): a gateway's commit marks each (day
bucket, cluster) it stored rows for, in the catalog the Celery tick reads, stamped by PostgreSQL's
clock; and day-old samples a real gateway receives over HTTP get their findings from a real
Celery worker and beat with nobody running a backfill."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from sqlalchemy import select

from analyzers.base import StaticJobCatalog
from analyzers.run.celery_app import window_slices
from analyzers.run.results import FindingStore
from analyzers.run.runner import Pipeline
from analyzers.run.window import Window
from simulator.maker.batches import EPOCH_MS, gpu_batch
from simulator.maker.series import T0, Fleet
from simulator.wire import TEST_TOKEN, post_batch
from tests.fleet.conftest import landed
from tests.fleet.test_fleet_e2e import env_for, recipe_config
from warehouse.catalog import arrivals
from warehouse.catalog.base import database_clock
from warehouse.fleet import reader
from warehouse.fleet.gateway import Gateway

DAY = timedelta(days=1)
DAY0 = datetime.fromtimestamp(EPOCH_MS / 1000, UTC)
IDLE: dict[str, Any] = {"gpu_util": 0.0, "gr_engine_active": 0.0, "sm_active": 0.0}


def marks(gw: Gateway) -> list[tuple[datetime, str, datetime, datetime]]:
    t = arrivals.window_arrivals
    with gw.catalog.connect() as conn:
        rows = conn.execute(
            select(t.c.bucket_start, t.c.cluster, t.c.min_ts, t.c.max_ts).order_by(
                t.c.bucket_start, t.c.cluster
            )
        ).all()
    return [tuple(r) for r in rows]  # type: ignore[misc]


def test_a_gateway_commit_marks_each_day_and_cluster_it_stored_by_the_catalogs_clock(
    gateway: Gateway,
) -> None:
    clock = database_clock(gateway.catalog)
    before = clock()
    for day, cluster in [(0, "east"), (0, "west"), (1, "east")]:
        batch = gpu_batch("n1", start_ms=EPOCH_MS + day * 86_400_000, cluster=cluster)
        assert post_batch(gateway.url, "gpu_samples", batch, token=TEST_TOKEN).status == 202
    landed(gateway)  # the marks are made as the log is staged, off the ack path
    after = clock()
    last = DAY0 + timedelta(seconds=9)  # 10 timestamps a second apart
    assert marks(gateway) == [
        (DAY0, "east", DAY0, last),
        (DAY0, "west", DAY0, last),
        (DAY0 + DAY, "east", DAY0 + DAY, last + DAY),
    ]
    with gateway.catalog.connect() as conn:
        owed = arrivals.owed(conn, "0/1")
    assert [(o.bucket_start, o.clusters) for o in owed] == [
        (DAY0, ("east", "west")),
        (DAY0 + DAY, ("east",)),
    ]
    assert all(before <= o.arrival_at <= after for o in owed)


BROKER_DB = "redis://127.0.0.1:6379/13"


def yesterdays_fleet() -> tuple[pa.Table, datetime]:
    """An idle job and a low-utilisation job, replayed as if sampled yesterday from 00:00 UTC."""
    fleet = Fleet().gpus("idle-1", "h1", range(2), 0, 120, **IDLE)
    fleet.gpus("low-1", "h2", range(2), 0, 120, gpu_util=10.0)
    gpu = fleet.tables()["gpu_samples"]
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    yesterday = today - DAY
    ts = gpu.column("ts")
    shifted = pc.add(ts, pa.scalar(yesterday - T0, pa.duration(ts.type.unit)))
    return gpu.set_column(gpu.schema.get_field_index("ts"), "ts", shifted), yesterday


@pytest.mark.slow
@pytest.mark.real_component("redis")
def test_day_old_samples_at_a_gateway_get_findings_from_beat_and_a_worker_without_backfill(
    gateway: Gateway, tmp_path: Path
) -> None:
    redis = pytest.importorskip("redis")
    try:
        # an earlier run killed mid-way leaves its tasks (stale windows, old arrival marks) queued
        redis.Redis.from_url(BROKER_DB).flushdb()
    except redis.exceptions.ConnectionError:
        pytest.skip("no Redis at 127.0.0.1:6379")
    gpu, yesterday = yesterdays_fleet()
    for i in range(0, gpu.num_rows, 480):
        batch = gpu.slice(i, 480)
        assert post_batch(gateway.url, "gpu_samples", batch, token=TEST_TOKEN).status == 202

    settings = gateway.settings
    env = {
        **env_for(settings, recipe_config(settings, tmp_path / "fleetscope.toml"), 0),
        "FLEETSCOPE_CELERY_BROKER_URL": BROKER_DB,
        "FLEETSCOPE_SCHEDULER_INTERVAL_S": "2",
        "FLEETSCOPE_ANALYZERS_LATENESS_S": "0",
    }
    log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(  # the worker runs beat too (-B): the only scheduler there is
        [sys.executable, "-m", "celery", "-A", "analyzers.run.celery_app", "worker", "-B",
         "-s", str(tmp_path / "beat-schedule"), "--hostname", f"arrivals-{uuid.uuid4().hex[:8]}@%h",
         "--pool", "solo", "--loglevel", "WARNING"],
        env=env, cwd=Path(__file__).parents[2], stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    store = FindingStore(gateway.catalog)
    n = window_slices(settings)  # fleet mode: one slice per window, cut per cluster
    partitions = [f"{p}/{n}" for p in range(n)]  # the schedule's keys: each slice owes the bucket
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            stored = store.findings()
            if stored and not any(store.owed(key) for key in partitions):
                break
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()
            time.sleep(0.2)
    finally:
        worker.terminate()
        worker.wait(timeout=60)
        log.close()

    window = Window(yesterday, yesterday + DAY)
    conn = reader.connect(gateway.writer.tables, window.start, window.end)
    expected = Pipeline.from_settings(settings).run(conn, window, StaticJobCatalog()).findings
    assert {(f.rule_id, f.job_id) for f in expected} >= {("R1", "idle-1"), ("R2", "low-1")}
    assert sorted(s.finding.finding_id for s in stored) == sorted(f.finding_id for f in expected)
    assert {s.finding.window_start for s in stored} == {yesterday}
    assert [store.owed(key) for key in partitions] == [[]] * n  # every slice analysed the mark
