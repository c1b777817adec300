"""Scheduled windows in fleet mode are cut per (day, cluster): beat's tick on real Celery workers
(Redis broker and result backend) sends one task per cluster holding data for the window, each
reading only its cluster's rows of the Iceberg tables, landed together. They store exactly what
the embedded scheduler stores on the same batches: the same findings by id and content, a
fleet-wide rule (R4: a user's jobs in two clusters) included, the sharing plan (the fleet CLI's
over the stored window), and the same quantile panes, kept
in the fleet's own storage by workers whose local sketch folders differ (two machines), so that
`fleetscope quantiles` and the dashboard anywhere give the percentiles embedded mode gives."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from analyzers.quantiles.store import open_store
from analyzers.run.celery_app import make_app
from analyzers.run.results import FindingStore, StoredFinding
from analyzers.run.runner import Pipeline
from analyzers.run.schedule import WATERMARK_KEY, run_due
from analyzers.sharing.stored import read_stored
from fleetscope.settings import Settings
from simulator.maker.series import T0, Fleet
from simulator.wire import TEST_TOKEN, post_batch
from tests.analyzers.test_sharing_stored import rounded
from tests.fleet.test_fleet_e2e import env_for, recipe_config
from warehouse import catalog
from warehouse.catalog.fleet import Job, upsert_jobs
from warehouse.catalog.plans import StoredPlan
from warehouse.fleet.gateway import Gateway
from warehouse.fleet.tables import FleetConfig, FleetTables
from warehouse.ingest.runtime import Server
from warehouse.read import reader as embedded_reader

pytestmark = [pytest.mark.slow, pytest.mark.real_component("redis")]

BROKER = "redis://127.0.0.1:6379/10"
DAY = timedelta(days=1)
WEEK_S = 7 * 86400.0
IDLE: dict[str, Any] = {"gpu_util": 0.0, "gr_engine_active": 0.0, "sm_active": 0.0}
CLUSTERS = ("east", "west")
# ann runs one job per cluster: 8 GPUs x 4 h = 32 GPU-h each at 10 % utilisation. Only the two
# together pass R4's 50 GPU-h floor, so R4 finds her only if it sees both clusters.
JOBS = [Job(f"ann-{c}", cluster=c, user="ann", team="ml") for c in CLUSTERS] + [
    Job(f"{j}-{c}", cluster=c, user="bob", team="ml") for c in CLUSTERS for j in ("idle", "low")
]


def cluster_samples(cluster: str) -> pa.Table:
    fleet = Fleet().gpus(f"idle-{cluster}", f"{cluster}-1", range(2), 0, 90, **IDLE)
    fleet.gpus(f"low-{cluster}", f"{cluster}-2", range(2), 30, 90, gpu_util=10.0)
    fleet.gpus(f"ann-{cluster}", f"{cluster}-3", range(8), 60, 240, gpu_util=10.0)
    gpu = fleet.tables()["gpu_samples"]
    return gpu.set_column(1, "cluster", [[cluster] * gpu.num_rows])


def send(url: str, samples: pa.Table) -> None:
    for i in range(0, samples.num_rows, 2000):
        assert (
            post_batch(url, "gpu_samples", samples.slice(i, 2000), token=TEST_TOKEN).status == 202
        )


@pytest.fixture
def broker() -> Iterator[str]:
    redis = pytest.importorskip("redis")
    client = redis.Redis.from_url(BROKER)
    try:
        client.flushdb()  # an earlier run killed mid-way leaves its tasks and results
    except redis.exceptions.ConnectionError:
        pytest.skip("no Redis at 127.0.0.1:6379")
    yield BROKER
    client.flushdb()


def stored(store: FindingStore) -> list[tuple[Any, ...]]:
    def row(s: StoredFinding) -> tuple[Any, ...]:
        f = s.finding
        return (f.finding_id, f.rule_id, f.job_id, f.host, f.gpus, str(f.severity),
                f.wasted_gpu_hours, f.window_start, f.window_end, f.user, f.team,
                json.dumps(f.evidence, sort_keys=True), s.state)  # fmt: skip

    return sorted(map(row, store.findings()))


def panes(settings: Settings) -> list[tuple[Any, ...]]:
    conn: duckdb.DuckDBPyConnection = open_store(settings).connect()
    return conn.execute("SELECT * FROM sketch_buckets ORDER BY ALL").fetchall()


def percentiles_on_cli(config: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    from app.cli import main

    capsys.readouterr()
    end = (T0 + DAY).isoformat()
    argv = ["--config", str(config), "quantiles", "active_pct", "--by", "cluster"]
    assert main([*argv, "--end", end, "--window", "1d", "--q", "0.5,0.9,0.99", "--json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def plan_on_cli(config: Path, plan: StoredPlan, capsys: pytest.CaptureFixture[str]) -> Any:
    """`fleetscope plan sharing --format json` over the stored plan's window."""
    from app.cli import main

    capsys.readouterr()
    days = (plan.window_end - plan.window_start).total_seconds() / 86400
    argv = ["--config", str(config), "plan", "sharing", "--format", "json", "--days", f"{days}"]
    assert main([*argv, "--end", plan.window_end.isoformat()]) == 0
    return json.loads(capsys.readouterr().out)


def percentiles_on_dashboard(settings: Settings) -> list[list[float]]:
    from dashboard import state

    shown = state.sketch_percentiles(state.warehouse_key(settings), T0, T0 + DAY, 3600)
    assert shown is not None
    return [[float(v) for v in row] for row in shown.values.tolist()]


def toml(path: Path, settings: Settings, keys: tuple[str, ...]) -> Path:
    sections: dict[str, list[str]] = {}
    for key in keys:
        section, name = key.split(".")
        sections.setdefault(section, []).append(f"{name} = {json.dumps(settings.raw(key))}")
    path.write_text("".join(f"[{s}]\n" + "\n".join(lines) + "\n" for s, lines in sections.items()))
    return path


def test_a_scheduled_fleet_window_reads_per_cluster_and_stores_what_embedded_mode_stores(
    fleet_settings: Settings,
    broker: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = fleet_settings.with_overrides(
        celery__broker_url=broker, analyzers__lateness_s=0.0, analyzers__partitions=2
    )
    samples = {c: cluster_samples(c) for c in CLUSTERS}
    gw = Gateway(settings)
    gw.start()
    try:
        for data in samples.values():
            send(gw.url, data)
        with gw.catalog.begin() as conn:
            upsert_jobs(conn, JOBS)
    finally:
        gw.stop()

    # embedded mode on the same batches, analysed by the embedded scheduler's own function
    one_box = settings.with_overrides(
        server__mode="embedded",
        warehouse__catalog_url=f"sqlite:///{tmp_path / 'one-box.sqlite'}",
        core__data_dir=str(tmp_path / "one-box"),
    )
    embedded = Server(one_box)
    embedded.start()
    try:
        for data in samples.values():
            send(embedded.url, data)
    finally:
        embedded.stop()
    one_box_store = FindingStore(catalog.connect(one_box.warehouse.catalog_url))
    with one_box_store.engine.begin() as conn:
        upsert_jobs(conn, JOBS)
    tick = T0 + DAY  # the window is T0's whole day bucket
    ran = run_due(
        Pipeline.from_settings(one_box),
        one_box_store,
        lambda: embedded_reader.connect(one_box),
        tick,
        bucket_s=one_box.analyzers.bucket_s,
        lateness_s=0.0,
        interval_s=one_box.scheduler.interval_s,
    )
    assert [(r.window.start, r.window.end, r.errors) for r in ran] == [(T0, T0 + DAY, {})]

    # fleet mode: beat's tick on two real workers, as on two machines: local folders differ
    # docs/fleet.md's settings file, as every fleet process reads it (the workers bind no port).
    config = recipe_config(settings, tmp_path / "fleetscope.toml")
    env = {
        **env_for(settings, config, 0),
        "FLEETSCOPE_CELERY_BROKER_URL": broker,
        "FLEETSCOPE_ANALYZERS_LATENESS_S": "0",
        "FLEETSCOPE_ANALYZERS_PARTITIONS": "2",  # fleet mode still sends one slice per window
    }
    logs = [tmp_path / f"worker-{n}.log" for n in range(2)]
    workers = []
    for n, log in enumerate(logs):
        with log.open("wb") as out:
            workers.append(subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "analyzers.run.celery_app", "worker",
                 "--pool", "prefork", "--concurrency", "1", "--loglevel", "WARNING",
                 "--hostname", f"parts-{n}-{uuid.uuid4().hex[:8]}@%h"],
                env={**env, "FLEETSCOPE_CORE_DATA_DIR": str(tmp_path / f"machine-{n}"),
                     "FLEETSCOPE_ANALYZERS_SKETCHES_DIR": str(tmp_path / f"sketches-{n}")},
                cwd=Path(__file__).parents[2], stdout=out, stderr=subprocess.STDOUT,
            ))  # fmt: skip
    store = FindingStore(catalog.connect(settings.warehouse.catalog_url))
    keys = ["0/1"]
    try:
        producer = make_app(settings)
        sent = producer.send_task("fleetscope.tick", args=[tick.isoformat()]).get(timeout=120)
        assert [a[:4] for a in sent] == [[T0.isoformat(), tick.isoformat(), 0, 1]]
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if all(store.watermark(WATERMARK_KEY, k) == tick for k in keys):
                break
            assert all(w.poll() is None for w in workers), [x.read_text() for x in logs]
            time.sleep(0.2)
        else:
            pytest.fail(str([x.read_text() for x in logs]))
        while (plan := read_stored(store.engine, WEEK_S)) is None and time.monotonic() < deadline:
            time.sleep(0.2)  # the landing sent the sharing step (analyzers.sharing.stored)
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(timeout=60)

    assert [store.owed(k) for k in keys] == [[]]  # the arrival mark is analysed too
    fleet_found = stored(store)
    assert {(f[1], f[2]) for f in fleet_found} >= {("R1", "idle-east"), ("R2", "low-west")}
    assert ("R4", None) in {(f[1], f[2]) for f in fleet_found}  # ann, over both clusters
    assert fleet_found == stored(one_box_store)
    # the same quantile panes, in the fleet's storage: no worker's local folder holds any
    assert panes(settings) and panes(settings) == panes(one_box)
    assert not any((tmp_path / f"sketches-{n}").exists() for n in range(2))
    assert not (tmp_path / "sketches").exists()  # nor the test's (the fleet settings' folder)
    # and read from the settings alone, as on another machine: the CLI and the dashboard
    fleet_keys = ("server.mode", "warehouse.catalog_url", "fleet.warehouse_uri",
                  "fleet.s3_endpoint", "fleet.s3_access_key", "fleet.s3_secret_key")  # fmt: skip
    elsewhere = settings.with_overrides(core__data_dir=str(tmp_path / "dashboard-host"))
    fleet_cli = toml(tmp_path / "fleet.toml", elsewhere, ("core.data_dir", *fleet_keys))
    one_box_cli = toml(tmp_path / "one-box.toml", one_box, ("core.data_dir", "server.mode"))
    by_cluster = percentiles_on_cli(fleet_cli, capsys)
    assert [g["cluster"] for g in by_cluster["groups"]] == list(CLUSTERS)
    assert by_cluster == percentiles_on_cli(one_box_cli, capsys)
    for key in ("fleet.s3_access_key", "fleet.s3_secret_key"):  # not in the dashboard's key
        monkeypatch.setenv("FLEETSCOPE_" + key.upper().replace(".", "_"), str(settings.raw(key)))
    assert percentiles_on_dashboard(elsewhere) == percentiles_on_dashboard(one_box)
    # the sharing plan the landing stored is the fleet CLI's over its window, read as any
    # machine reads it: to just past the newest sample, 7 days aligned as the page's window
    assert plan is not None, "fleet mode stored no sharing plan"
    newest = max(max(data.column("ts").to_pylist()) for data in samples.values())
    assert plan.window_end == newest + timedelta(milliseconds=1)
    assert rounded(plan_on_cli(fleet_cli, plan, capsys)) == rounded(
        {k: v for k, v in plan.document.items() if k != "rows"}
    )

    # each part task read only its cluster's rows, from its cluster's files only
    results = [
        json.loads(v)["result"]
        for v in producer.backend.client.mget(
            list(producer.backend.client.scan_iter("celery-task-meta-*"))
        )
    ]
    parts = [r for r in results if isinstance(r, dict) and "part" in r]
    tables = FleetTables(FleetConfig.from_settings(settings))
    gpu = tables.table("gpu_samples")
    files = {
        c: sum(1 for _ in gpu.scan(row_filter=f"cluster = '{c}'").plan_files()) for c in CLUSTERS
    }
    read = sorted(
        (p["part"]["cluster"], s["table"], s["rows"], s["files"], s["clusters"])
        for p in parts
        for s in p["scanned"]
        if s["table"] == "gpu_samples"
    )
    assert read == sorted(
        (c, "gpu_samples", samples[c].num_rows, files[c], [c]) for c in CLUSTERS
    )  # one part per cluster, none reading the whole fleet
    assert all(s["rows"] == 0 for p in parts for s in p["scanned"] if s["table"] != "gpu_samples")
