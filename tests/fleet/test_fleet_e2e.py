"""Fleet mode end to end, docs/fleet.md's "Run it" recipe followed with real parts on loopback:
PostgreSQL, an S3 server process, Redis, and every process the page lists, started from the page's
one settings file (its catalog, bucket, S3 server, broker, data folder and token swapped for this
test's) and its command lines: three gateways (`fleetscope server`, a port each), one Celery
worker and one beat (the page's `celery ... worker` and `celery ... beat` lines), and one agent,
`fleetscope-agent run` started as the page's step 5 says (its gateway list, the shared token, its
dcgm-exporter URL), scraping the simulator's dcgm-exporter on loopback (`fleetscope simulate`: the
agent needs no GPU). Beside it, six agents' real spool and shipper run in this process carrying
crafted batches of yesterday, spread over the gateways with the one shared token, so that the
findings can be compared with single-box mode's on the same batches. One gateway is kill -9'd
mid-run.

Asserted: the agent process's GPU samples land in the fleet's gpu_samples table, and it stops
cleanly on SIGTERM; every acknowledged row of the crafted batches is stored exactly once (0 lost,
0 duplicated), 0 Iceberg commit conflicts (counted in the gateways' logs: pyiceberg logs each
retry), and the findings beat's schedule stores for yesterday's bucket (arrival marks -> tick ->
per-cluster parts on the worker -> landing; nobody calls the analyzers) are exactly what the
analyzers find in single-box mode on the same batches.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import threading
import time
import tomllib
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from analyzers.base import StaticJobCatalog
from analyzers.findings import Finding
from analyzers.run.celery_app import window_slices
from analyzers.run.results import FindingStore
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
from warehouse import catalog as fleet_catalog
from warehouse.fleet import reader as fleet_reader
from warehouse.fleet.tables import FleetConfig, FleetTables
from warehouse.ingest.runtime import Server
from warehouse.read import reader as embedded_reader

pytestmark = [
    pytest.mark.slow,
    pytest.mark.real_component("postgres"),
    pytest.mark.real_component("redis"),
]

ROOT = Path(__file__).parents[2]
HOSTS = 6
ROWS_PER_BATCH = 96
IDLE: dict[str, Any] = {
    "gpu_util": 0.0,
    "gr_engine_active": 0.0,
    "sm_active": 0.0,
    "tensor_active": 0.0,
}
DAY = timedelta(days=1)
# Yesterday: beat re-opens a bucket only within analyzers.reopen_max_age_s of its tick (T0 is
# years ago), as it would for an agent's spool replayed after a day's outage.
YESTERDAY = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - DAY
WINDOW = Window(YESTERDAY, YESTERDAY + DAY)
BROKER = "redis://127.0.0.1:6379/11"  # a database of its own (tests/ use 10, 12-15)


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


def yesterdays(fleet: Fleet) -> pa.Table:
    gpu = fleet.tables()["gpu_samples"]
    ts = gpu.column("ts")
    shifted = pc.add(ts, pa.scalar(YESTERDAY - T0, pa.duration(ts.type.unit)))
    return gpu.set_column(gpu.schema.get_field_index("ts"), "ts", shifted)


def batches_by_host(gpu: pa.Table) -> dict[str, list[pa.Table]]:
    out: dict[str, list[pa.Table]] = {}
    for h in range(HOSTS):
        rows = gpu.filter(pa.compute.equal(gpu.column("host"), f"h{h}"))
        out[f"h{h}"] = [
            rows.slice(i, ROWS_PER_BATCH) for i in range(0, rows.num_rows, ROWS_PER_BATCH)
        ]
    return out


RECIPE = re.compile(r"<!-- recipe: fleetscope.toml -->\s*```toml\n(.*?)```", re.S)
CELERY = re.compile(r"<!-- recipe: celery -->\s*```\n(.*?)```", re.S)
AGENT = re.compile(r"<!-- recipe: agent -->\s*```\n(.*?)```", re.S)
# What the test swaps in the recipe's settings file: its own catalog, bucket, S3 server, data
# folder and token (everything else is the recipe's as written).
SWAPPED = (
    "core.data_dir", "server.tokens", "warehouse.catalog_url", "fleet.warehouse_uri",
    "fleet.s3_endpoint", "fleet.s3_access_key", "fleet.s3_secret_key", "celery.broker_url",
)  # fmt: skip
# Test speed-ups on top, through the environment as an operator would: no gateway plug-ins, quick
# flushes, a table commit every 2 s, a tick every 2 s with no lateness.
TUNING = (
    "server.plugins", "warehouse.flush_interval_s", "fleet.commit_interval_s",
    "scheduler.interval_s", "analyzers.lateness_s",
)  # fmt: skip


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
    table["celery"]["broker_url"] = BROKER
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


def celery_commands(data_dir: Path) -> dict[str, list[str]]:
    """docs/fleet.md's worker and beat command lines, by role, the page's data folder swapped for
    `data_dir` and a unique worker name added (Redis is shared with other test runs)."""
    (block,) = CELERY.findall((ROOT / "docs" / "fleet.md").read_text())
    commands: dict[str, list[str]] = {}
    for line in textwrap.dedent(block).splitlines():
        words = shlex.split(line.split("#")[0].replace("/var/lib/fleetscope", str(data_dir)))
        assert words[:4] == ["celery", "-A", "analyzers.run.celery_app", words[3]], line
        assert words[-1] == "&", line
        commands[words[3]] = [sys.executable, "-m", *words[:-1]]
    assert set(commands) == {"worker", "beat"}
    commands["worker"] += ["--hostname", f"e2e-{uuid.uuid4().hex[:8]}@%h"]
    return commands


def agent_command(
    ingest_urls: list[str], token: str, dcgm_url: str
) -> tuple[dict[str, str], list[str]]:
    """docs/fleet.md's agent line (step 5): its environment, with this test's gateways, token and
    dcgm-exporter swapped in, and its command."""
    (block,) = AGENT.findall((ROOT / "docs" / "fleet.md").read_text())
    words = shlex.split(textwrap.dedent(block).replace("\\\n", " "))
    env = {name: value for name, value in (w.split("=", 1) for w in words if "=" in w)}
    command = [word for word in words if "=" not in word]
    assert command == ["fleetscope-agent", "run"], command
    swaps = {
        "FLEETSCOPE_AGENT_INGEST_URL": ",".join(ingest_urls),
        "FLEETSCOPE_AGENT_TOKEN": token,
        "FLEETSCOPE_AGENT_DCGM_URL": dcgm_url,
    }
    assert set(env) == set(swaps), env  # the page shows every setting the agent needs
    return swaps, [str(Path(sys.executable).with_name(command[0])), *command[1:]]


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


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def recipe_settings(fleet_settings: Settings, broker: str) -> Settings:
    return fleet_settings.with_overrides(
        fleet__commit_interval_s=2.0,
        scheduler__interval_s=2.0,
        analyzers__lateness_s=0.0,
        celery__broker_url=broker,
    )


@pytest.fixture
def celery_procs(recipe_settings: Settings, tmp_path: Path) -> Iterator[dict[str, Path]]:
    """The recipe's worker and beat, as their own processes; their logs by role."""
    config = recipe_config(recipe_settings, tmp_path / "fleetscope.toml")
    data_dir = Path(str(recipe_settings.raw("core.data_dir")))
    procs, logs = [], {}
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    for role, command in celery_commands(data_dir).items():
        logs[role] = tmp_path / f"{role}.log"
        with logs[role].open("wb") as log:
            procs.append(
                subprocess.Popen(
                    command,
                    env=env_for(recipe_settings, config, 0),
                    cwd=workdir,  # the recipe's --schedule: nothing lands in the working folder
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
    try:
        yield logs
    finally:
        stop(procs)
    assert list(workdir.iterdir()) == []


@pytest.fixture
def gateway_procs(
    recipe_settings: Settings, tmp_path: Path
) -> Iterator[list[tuple[subprocess.Popen[bytes], str]]]:
    settings = recipe_settings
    FleetTables(FleetConfig.from_settings(settings)).ensure_all()  # not racing at first start
    config = recipe_config(settings, tmp_path / "fleetscope.toml")
    procs = []
    for n in range(3):
        port = free_port()
        env = env_for(settings, config, port)
        with (tmp_path / f"gateway-{n}.log").open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "app.cli", "server"],
                env=env,
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        RESTART_ENV[proc.pid] = env
        procs.append((proc, f"http://127.0.0.1:{port}"))
    try:
        for _, url in procs:
            wait_until(lambda u=url: _healthy(u), 180, f"gateway {url}")  # a loaded box
        yield procs
    finally:
        stop([proc for proc, _ in procs])  # the restarted one too (the list is the test's)


@dataclass
class AgentProc:
    proc: subprocess.Popen[bytes]
    host: str  # the simulated host it scrapes
    gpus: set[int]  # the GPU indices on that host's dcgm-exporter page
    log: Path
    dead_dir: Path  # its spool's refused batches


@pytest.fixture
def agent_proc(
    gateway_procs: list[tuple[subprocess.Popen[bytes], str]], tmp_path: Path
) -> Iterator[AgentProc]:
    """One simulated host's dcgm-exporter (`fleetscope simulate`) and the real agent process of
    docs/fleet.md's step 5 scraping it, shipping to the three gateways (the one killed first)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCOPE_")}
    simulator = subprocess.Popen(
        [str(Path(sys.executable).with_name("fleetscope")), "simulate", "--hosts", "1",
         "--base-port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=clean,
    )  # fmt: skip
    assert simulator.stdout is not None
    host, dcgm_url = simulator.stdout.readline().split()
    with urllib.request.urlopen(dcgm_url, timeout=30) as resp:
        page = resp.read().decode()
    gpus = {
        int(sample.labels["gpu"])
        for family in text_string_to_metric_families(page)
        if family.name == "DCGM_FI_DEV_POWER_USAGE"
        for sample in family.samples
    }
    recipe_env, command = agent_command([url for _, url in gateway_procs], TEST_TOKEN, dcgm_url)
    tuning = {  # this test's: its own folders, no port of its own, scrape and ship every second
        "FLEETSCOPE_AGENT_SPOOL_DIR": str(tmp_path / "agent-spool"),
        "FLEETSCOPE_AGENT_SDK_SOCKET": str(tmp_path / "agent.sock"),
        "FLEETSCOPE_AGENT_METRICS_PORT": "0",
        "FLEETSCOPE_AGENT_INTERVAL_S": "1",
        "FLEETSCOPE_AGENT_SHIP_INTERVAL_S": "1",
    }
    log = tmp_path / "agent.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command,
            env={**clean, **recipe_env, **tuning},
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield AgentProc(proc, host, gpus, log, tmp_path / "agent-spool" / "dead")
    finally:
        stop([proc])
        simulator.terminate()
        simulator.wait(30)
        simulator.stdout.close()


def restart(proc: subprocess.Popen[bytes], log: Path) -> subprocess.Popen[bytes]:
    """The killed gateway's command again, with its environment (its port: its log's name)."""
    args = proc.args
    assert isinstance(args, list)
    with log.open("ab") as out:
        return subprocess.Popen(
            args, env=RESTART_ENV[proc.pid], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=out
        )


RESTART_ENV: dict[int, dict[str, str]] = {}  # gateway pid -> its environment


def commit_conflicts(url: str) -> float:
    """fleetscope_iceberg_commit_conflicts_total on a gateway's /metrics."""
    request = urllib.request.Request(
        url + "/metrics", headers={"Authorization": f"Bearer {TEST_TOKEN}"}
    )
    with urllib.request.urlopen(request, timeout=30) as resp:
        text = resp.read().decode()
    (line,) = [x for x in text.splitlines() if x.startswith("fleetscope_iceberg_commit_conflicts")]
    return float(line.split()[-1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def key(f: Finding) -> tuple[object, ...]:
    return (f.rule_id, f.job_id, f.host, f.severity, round(f.wasted_gpu_hours, 9))


@pytest.mark.timeout(1800)  # every process of the recipe on a busy 2-core box: minutes, not seconds
def test_the_fleet_recipe_loses_and_duplicates_nothing_and_beat_finds_what_one_box_finds(
    gateway_procs: list[tuple[subprocess.Popen[bytes], str]],
    celery_procs: dict[str, Path],
    agent_proc: AgentProc,
    recipe_settings: Settings,
    tmp_path: Path,
) -> None:
    fleet_settings = recipe_settings
    sent = yesterdays(fleet_data())
    per_host = batches_by_host(sent)
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
            lambda: sum(s.depth for s in spools) <= total_batches * 2 // 3, 240, "a third acked"
        )
        victim.send_signal(signal.SIGKILL)  # mid-run: agents on it have batches in flight
        victim.wait()
        # Restarted on its disk (the same name, so the same ingest log): it replays what it had
        # acknowledged and not staged yet, as Prometheus replays its write-ahead log.
        gateway_procs[0] = (restart(victim, tmp_path / "gateway-0.log"), gateway_procs[0][1])
        wait_until(lambda: _healthy(gateway_procs[0][1]), 120, "the killed gateway restarted")
        wait_until(lambda: sum(s.depth for s in spools) == 0, 300, "every batch acknowledged")
    finally:
        stop.set()
        for sender in senders:
            sender.join(timeout=10)
    assert [list(s.dead_dir.iterdir()) for s in spools] == [[]] * HOSTS  # nothing refused

    tables = FleetTables(FleetConfig.from_settings(fleet_settings))
    stored, _ = fleet_reader.scan(tables, "gpu_samples", WINDOW.start, WINDOW.end)
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
    # ... and the gateways' own count of pyiceberg CommitFailedException retries says the same.
    assert sum(commit_conflicts(url) for _, url in gateway_procs) == 0

    # The real agent's samples, scraped from the simulator since the start and shipped across
    # the kill, are in the fleet's table: every GPU of its host's page. Then it stops cleanly.
    def agents_gpus() -> set[int]:
        now = datetime.now(UTC)
        rows, _ = fleet_reader.scan(tables, "gpu_samples", now - DAY, now + DAY)
        mine = rows.filter(pc.equal(rows.column("host"), agent_proc.host))
        return set(mine.column("gpu_index").to_pylist())

    deadline = time.monotonic() + 300
    while agents_gpus() != agent_proc.gpus:
        assert agent_proc.proc.poll() is None, agent_proc.log.read_text(errors="replace")
        assert time.monotonic() < deadline, agent_proc.log.read_text(errors="replace")
        time.sleep(1)
    agent_proc.proc.send_signal(signal.SIGTERM)
    assert agent_proc.proc.wait(timeout=60) == 0, agent_proc.log.read_text(errors="replace")
    assert list(agent_proc.dead_dir.iterdir()) == []  # no batch of it refused by a gateway

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
    expected = Pipeline.from_settings(fleet_settings).run(one_box, WINDOW, StaticJobCatalog())
    assert not expected.errors
    assert {f.rule_id for f in expected.findings} >= {"R1", "R2"}  # the data has something to find

    # Beat's schedule found them: every slice has analysed the last arrival mark of yesterday's
    # bucket (the gateways stamped it before answering the last batch), and what it landed is
    # what one box finds. Nothing in this test ran an analyzer on the fleet's tables.
    store = FindingStore(fleet_catalog.connect(fleet_settings.warehouse.catalog_url))
    slices = [f"{p}/{window_slices(fleet_settings)}" for p in range(window_slices(fleet_settings))]
    deadline = time.monotonic() + 900  # late batches (the killed gateway's) re-open the bucket
    while any(store.owed(s) for s in slices) or not any(
        s.finding.window_start == WINDOW.start for s in store.findings()
    ):
        logs = {role: log.read_text(errors="replace") for role, log in celery_procs.items()}
        assert time.monotonic() < deadline, f"beat's analysis not landed: {logs}"
        time.sleep(0.5)
    # Yesterday's bucket: the agent process's samples (today's) are analysed in their own.
    stored_findings = [s for s in store.findings() if s.finding.window_start == WINDOW.start]
    found = [s.finding for s in stored_findings]
    assert {s.state for s in stored_findings} == {"open"}
    assert sorted(map(key, found)) == sorted(map(key, expected.findings))
    by_key = {key(f): f for f in found}
    assert [by_key[key(e)].evidence for e in expected.findings] == [
        e.evidence for e in expected.findings
    ]
