"""Analyzers fan out per (day, cluster) partition over real Celery workers (Redis broker), each
reading only its partition of the Iceberg tables; merged, they equal one run over all the data,
and the partitions' quantile sketches merge into exactly the sketch of all the rows."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analyzers.base import StaticJobCatalog
from analyzers.run.celery_app import make_app
from analyzers.run.fleet import merge
from analyzers.run.runner import Pipeline
from analyzers.run.window import Window
from analyzers.sketch.core import QuantileSketch
from fleetscope.settings import Settings
from simulator.maker.series import T0, Fleet
from simulator.wire import TEST_TOKEN, post_batch
from tests.fleet.test_fleet_e2e import env_for, recipe_config
from warehouse.fleet import reader
from warehouse.fleet.gateway import Gateway

pytestmark = [pytest.mark.slow, pytest.mark.real_component("redis")]

BROKER = "redis://127.0.0.1:6379/14"
IDLE: dict[str, Any] = {"gpu_util": 0.0, "gr_engine_active": 0.0, "sm_active": 0.0}


@pytest.fixture
def loaded(fleet_settings: Settings) -> Iterator[Settings]:
    redis = pytest.importorskip("redis")
    try:
        # an earlier run killed mid-way leaves its tasks (stale windows, old arrival marks) queued
        redis.Redis.from_url(BROKER).flushdb()
    except redis.exceptions.ConnectionError:
        pytest.skip("no Redis at 127.0.0.1:6379")
    settings = fleet_settings.with_overrides(celery__broker_url=BROKER)
    gw = Gateway(settings)
    gw.start()
    try:
        for cluster in ("east", "west"):
            fleet = Fleet().gpus(f"idle-{cluster}", "h1", range(2), 0, 90, **IDLE)
            fleet.gpus(f"low-{cluster}", "h2", range(2), 30, 90, gpu_util=10.0)
            gpu = fleet.tables()["gpu_samples"]
            gpu = gpu.set_column(1, "cluster", [[cluster] * gpu.num_rows])
            for i in range(0, gpu.num_rows, 500):
                batch = gpu.slice(i, 500)
                assert post_batch(gw.url, "gpu_samples", batch, token=TEST_TOKEN).status == 202
    finally:
        gw.stop()
    yield settings


def test_partitions_analyzed_on_two_workers_merge_into_the_whole_runs_answer(
    loaded: Settings, tmp_path: Path
) -> None:
    queue = f"fleet-test-{uuid.uuid4().hex[:8]}"
    env = {
        **env_for(loaded, recipe_config(loaded, tmp_path / "fleetscope.toml"), 0),
        "FLEETSCOPE_CELERY_BROKER_URL": BROKER,
    }
    log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "analyzers.run.celery_app", "worker",
         "--pool", "prefork", "--concurrency", "2", "-Q", queue, "--loglevel", "WARNING"],
        env=env, cwd=Path(__file__).parents[2], stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        producer = make_app(loaded)
        day = T0.date().isoformat()
        sent = [
            producer.send_task("fleetscope.fleet_analyze_partition", args=[day, c], queue=queue)
            for c in ("east", "west")
        ]
        merged = merge([r.get(timeout=120) for r in sent])
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        log.close()

    from analyzers.quantiles.store import open_store
    from warehouse.fleet.tables import FleetConfig, FleetTables

    # each partition task kept its cluster's quantile panes once, in the fleet's one store
    kept = (
        open_store(loaded)
        .connect()
        .execute(
            "SELECT cluster, CAST(sum(count) AS BIGINT) FROM sketch_panes "
            "WHERE metric = 'gpu_util_pct' AND resolution_s = 10 GROUP BY ALL ORDER BY ALL"
        )
    )
    assert kept.fetchall() == [("east", 2 * 540 + 2 * 540), ("west", 2 * 540 + 2 * 540)]
    tables = FleetTables(FleetConfig.from_settings(loaded))
    window = Window(T0, T0 + timedelta(days=1))
    conn = reader.connect(tables, window.start, window.end)
    one_read = replace(Pipeline.from_settings(loaded), sketches=None)  # the findings only: its
    whole = one_read.run(conn, window, StaticJobCatalog())  # panes would have marks of their own
    util = conn.execute("SELECT gpu_util FROM gpu_samples WHERE gpu_util IS NOT NULL").fetchnumpy()
    sketch = QuantileSketch()
    sketch.add(np.asarray(util["gpu_util"], dtype=np.float64))

    assert merged.errors == {} and not whole.errors
    assert merged.rows == 2 * (2 * 540 + 2 * 540)
    assert [f["finding_id"] for f in merged.findings] == sorted(
        f.finding_id for f in whole.findings
    )
    assert {f["rule_id"] for f in merged.findings} >= {"R1", "R2"}
    assert merged.gpu_util is not None
    assert merged.gpu_util.to_bytes() == sketch.to_bytes()  # lossless merge
