"""Fleet mode end to end with real parts on loopback: PostgreSQL, an S3 server process, three
gateway processes started as docs/fleet.md ("Run it") says: `fleetscope server` with the page's
one settings file (its catalog, bucket, S3 server and data folder swapped for this test's) and a
port each, agents' real spool and shipper spread over them, and one gateway kill -9'd mid-run.

Asserted: every acknowledged row is stored exactly once (0 lost, 0 duplicated), 0 Iceberg commit
conflicts (counted in the gateways' logs: pyiceberg logs each retry), and the analyzers
find exactly what they find in single-box mode (the embedded server) on the same batches.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import tomllib
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from analyzers.base import StaticJobCatalog
from analyzers.findings import Finding
from analyzers.run.runner import Pipeline
from analyzers.run.window import Window
from collector.backoff import Backoff
from collector.http import UrllibTransport
from collector.metrics import AgentMetrics
from collector.shipper import Shipper
from collector.spool import Spool
from fleetscope.contract import to_ipc
from fleetscope.settings import Settings
from simulator.maker.series import T0, Fleet
from simulator.wire import TEST_TOKEN, post_batch
from tests.fleet.conftest import free_port, wait_until
from warehouse.fleet import reader as fleet_reader
from warehouse.fleet.tables import FleetConfig, FleetTables
from warehouse.ingest.runtime import Server
from warehouse.read import reader as embedded_reader

pytestmark = [pytest.mark.slow, pytest.mark.real_component("postgres")]

ROOT = Path(__file__).parents[2]
HOSTS = 6
ROWS_PER_BATCH = 96
IDLE: dict[str, Any] = {
    "gpu_util": 0.0,
    "gr_engine_active": 0.0,
    "sm_active": 0.0,
    "tensor_active": 0.0,
}
WINDOW = Window(T0, T0 + timedelta(days=1))


def fleet_data() -> Fleet:
    fleet = Fleet()
    for h in range(HOSTS):
        shapes: list[tuple[str, dict[str, Any]]] = [
            ("idle", IDLE),
            ("low", {"gpu_util": 10.0}),
            ("ok", {}),
        ]
        job, fields = shapes[h % 3]
        fleet.gpus(f"{job}-{h}", f"h{h}", range(2), 0, 120, **fields)
    return fleet


def batches_by_host(fleet: Fleet) -> dict[str, list[pa.Table]]:
    gpu = fleet.tables()["gpu_samples"]
    out: dict[str, list[pa.Table]] = {}
    for h in range(HOSTS):
        rows = gpu.filter(pa.compute.equal(gpu.column("host"), f"h{h}"))
        out[f"h{h}"] = [
            rows.slice(i, ROWS_PER_BATCH) for i in range(0, rows.num_rows, ROWS_PER_BATCH)
        ]
    return out


RECIPE = re.compile(r"<!-- recipe: fleetscope.toml -->\s*```toml\n(.*?)```", re.S)
# What the test swaps in the recipe's settings file: its own catalog, bucket, S3 server, data
# folder and token (everything else is the recipe's as written).
SWAPPED = (
    "core.data_dir", "server.tokens", "warehouse.catalog_url", "fleet.warehouse_uri",
    "fleet.s3_endpoint", "fleet.s3_access_key", "fleet.s3_secret_key", "celery.broker_url",
)  # fmt: skip
# Test speed-ups on top, through the environment as an operator would: no plug-ins (the analyzers
# run in this process), quick flushes and a short lease (the killed gateway's claims expire).
TUNING = ("server.plugins", "warehouse.flush_interval_s", "fleet.lease_s")


def recipe_config(settings: Settings, path: Path) -> Path:
    """docs/fleet.md's one settings file for every process, with this test's swaps, at `path`."""
    (block,) = RECIPE.findall((ROOT / "docs" / "fleet.md").read_text())
    table = tomllib.loads(textwrap.dedent(block))
    keys = {f"{section}.{name}" for section, values in table.items() for name in values}
    assert keys == set(SWAPPED) | {"server.mode", "scheduler.mode"}, keys
    assert (table["server"]["mode"], table["scheduler"]["mode"]) == ("fleet", "celery")
    for key in SWAPPED:
        section, name = key.split(".")
        table[section][name] = str(settings.raw(key))
    table["celery"]["broker_url"] = "redis://127.0.0.1:6379/0"
    lines = []
    for section, values in table.items():
        lines += [f"[{section}]", *(f"{k} = {json.dumps(v)}" for k, v in values.items()), ""]
    path.write_text("\n".join(lines))
    return path


def env_for(settings: Settings, config: Path, port: int) -> dict[str, str]:
    """The recipe's way: the settings file, the gateway's own port, the test's tunings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCOPE_")}
    env["FLEETSCOPE_CONFIG"] = str(config)
    env["FLEETSCOPE_SERVER_PORT"] = str(port)
    for key in TUNING:
        env["FLEETSCOPE_" + key.upper().replace(".", "_")] = str(settings.raw(key))
    return env


@pytest.fixture
def gateway_procs(
    fleet_settings: Settings, tmp_path: Path
) -> Iterator[list[tuple[subprocess.Popen[bytes], str]]]:
    settings = fleet_settings.with_overrides(fleet__lease_s=5.0)
    FleetTables(FleetConfig.from_settings(settings)).ensure_all()  # not racing at first start
    config = recipe_config(settings, tmp_path / "fleetscope.toml")
    procs = []
    for n in range(3):
        port = free_port()
        with (tmp_path / f"gateway-{n}.log").open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "app.cli", "server"],
                env=env_for(settings, config, port),
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        procs.append((proc, f"http://127.0.0.1:{port}"))
    try:
        for _, url in procs:
            wait_until(lambda u=url: _healthy(u), 60, f"gateway {url}")
        yield procs
    finally:
        for proc, _ in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc, _ in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def key(f: Finding) -> tuple[object, ...]:
    return (f.rule_id, f.job_id, f.host, f.severity, round(f.wasted_gpu_hours, 9))


def test_three_gateways_one_killed_lose_and_duplicate_nothing_and_find_what_one_box_finds(
    gateway_procs: list[tuple[subprocess.Popen[bytes], str]],
    fleet_settings: Settings,
    tmp_path: Path,
) -> None:
    data = fleet_data()
    per_host = batches_by_host(data)
    urls = [url for _, url in gateway_procs]
    stop = threading.Event()
    spools: list[Spool] = []
    senders: list[threading.Thread] = []
    for n, (host, batches) in enumerate(per_host.items()):
        spool = Spool(tmp_path / "spool" / host, max_bytes=1 << 30)
        order = urls[n % 3 :] + urls[: n % 3]  # agents spread over the three gateways
        shipper = Shipper(
            spool,
            ingest_url=",".join(order),
            token=TEST_TOKEN,
            agent_name=host,
            transport=UrllibTransport(),
            metrics=AgentMetrics(),
            backoff=Backoff(base_s=0.05, cap_s=0.5),
        )
        for batch in batches:
            spool.put("gpu_samples", to_ipc(batch))
        spools.append(spool)
        senders.append(threading.Thread(target=shipper.run, args=(stop, 0.2), daemon=True))
    total_batches = sum(s.depth for s in spools)
    for sender in senders:
        sender.start()
    try:
        victim, _ = gateway_procs[0]
        wait_until(
            lambda: sum(s.depth for s in spools) <= total_batches * 2 // 3, 60, "a third acked"
        )
        victim.send_signal(signal.SIGKILL)  # mid-run: agents on it have batches in flight
        victim.wait()
        wait_until(lambda: sum(s.depth for s in spools) == 0, 75, "every batch acknowledged")
    finally:
        stop.set()
        for sender in senders:
            sender.join(timeout=10)
    assert [list(s.dead_dir.iterdir()) for s in spools] == [[]] * HOSTS  # nothing refused

    tables = FleetTables(FleetConfig.from_settings(fleet_settings))
    stored, _ = fleet_reader.scan(tables, "gpu_samples", WINDOW.start, WINDOW.end)
    sent = data.tables()["gpu_samples"]
    keys = stored.group_by(["host", "gpu_index", "ts"]).aggregate([([], "count_all")])
    assert stored.num_rows == sent.num_rows  # 0 acknowledged rows lost
    assert keys.num_rows == sent.num_rows  # 0 duplicated
    # One committer at a time per table (warehouse.fleet.commit_lock): no gateway's append met a
    # concurrent commit, neither inside pyiceberg's own retries nor in the gateway's.
    logs = [(tmp_path / f"gateway-{n}.log").read_text(errors="replace") for n in range(3)]
    conflicts = sum(
        log.count("Commit failed due to a concurrent update") + log.count("Iceberg commit conflict")
        for log in logs
    )
    assert conflicts == 0

    embedded = Server(
        fleet_settings.with_overrides(
            server__mode="embedded",
            warehouse__catalog_url=f"sqlite:///{tmp_path / 'one-box.sqlite'}",
            core__data_dir=str(tmp_path / "one-box"),
        )
    )
    embedded.start()
    try:
        for batches in per_host.values():
            for batch in batches:
                assert (
                    post_batch(embedded.url, "gpu_samples", batch, token=TEST_TOKEN).status == 202
                )
        one_box = embedded_reader.connect(embedded.settings)
    finally:
        embedded.stop()
    fleet_conn = fleet_reader.connect(tables, WINDOW.start, WINDOW.end)
    catalog = StaticJobCatalog()
    expected = Pipeline.default().run(one_box, WINDOW, catalog)
    found = Pipeline.default().run(fleet_conn, WINDOW, catalog)
    assert not expected.errors and not found.errors
    assert {f.rule_id for f in expected.findings} >= {"R1", "R2"}  # the data has something to find
    assert sorted(map(key, found.findings)) == sorted(map(key, expected.findings))
    assert sorted(
        f.evidence == e.evidence
        for f, e in zip(
            sorted(found.findings, key=key), sorted(expected.findings, key=key), strict=True
        )
    ) == [True] * len(expected.findings)
