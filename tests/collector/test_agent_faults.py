"""Faults end to end against the REAL ingest server (a `fleetscope server` process on a tmp data
dir) and the fleet simulator's dcgm-exporter pages, over real HTTP on loopback:

- ingest stops (SIGTERM) for a while under load while the agent keeps scraping, then a new server
  process comes back on the same port and data dir: every served GPU sample is in the warehouse exactly once (read through
  warehouse.read.reader, values checked against prometheus_client's parse of the served pages), and
  the batches were committed in the order the agent sealed them (the server's batch ledger);
- the agent (a real `collector.cli run` process) is killed with SIGKILL while ingest is down and
  restarted: every batch it had spooled is stored, exactly once, before anything newer.

Only this test imports both the collector and the warehouse; the collector never does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.supervise import Child, Supervisor, free_port, http_ok
from collector.agent import build_agent
from collector.backoff import Backoff
from collector.spool import Spool, SpooledBatch
from fleetscope.contract import from_ipc
from fleetscope.settings import Settings, load_settings
from simulator.fleet import FleetSpec
from simulator.maker.batches import EPOCH_MS
from simulator.serve import ExporterFleet
from simulator.sim import FleetSimulator
from warehouse.read import reader
from warehouse.storage.paths import WarehousePaths

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
TOKEN = "t0ken"
T0 = EPOCH_MS // 1000 + 600  # today, inside raw retention


def wait_until(condition: Callable[[], bool], what: str, limit_s: float = 60.0) -> None:
    """Poll until `condition` holds; fails (naming `what`) only if it never does."""
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"never happened: {what}")
        time.sleep(0.02)


def server_settings(tmp_path: Path, port: int) -> Settings:
    return load_settings(env={}).with_overrides(
        core__data_dir=str(tmp_path / "data"), server__port=port, server__tokens=TOKEN,
    )  # fmt: skip


class Ingest:
    """`fleetscope server` processes on one port and data dir: stopped and started at will."""

    def __init__(self, tmp_path: Path, supervisor: Supervisor) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.settings = server_settings(tmp_path, self.port)
        self.supervisor = supervisor
        self.child: Child | None = None
        self.env = {
            "FLEETSCOPE_CONFIG": "",
            "FLEETSCOPE_CORE_DATA_DIR": str(tmp_path / "data"),
            "FLEETSCOPE_SERVER_TOKENS": TOKEN,
            "FLEETSCOPE_SERVER_PLUGINS": "",
            "FLEETSCOPE_WAREHOUSE_FLUSH_INTERVAL_S": "0.05",
        }

    def start(self) -> None:
        fleetscope = str(Path(sys.executable).with_name("fleetscope"))
        argv = [fleetscope, "server", "--host", "127.0.0.1", "--port", str(self.port)]
        self.child = self.supervisor.start("server", argv, self.env)
        deadline = time.monotonic() + 60
        probe = http_ok(f"{self.url}/healthz")
        while not probe():
            self.supervisor.check_alive()
            assert time.monotonic() < deadline, "ingest server did not start"
            time.sleep(0.05)

    def stop(self) -> None:
        assert self.child is not None
        assert self.supervisor.stop(self.child) == 0  # SIGTERM: flush, publish, close
        self.supervisor.children.remove(self.child)
        self.child = None

    def ledger(self) -> list[str]:
        """Batch ids in the order the server committed them (read once it is stopped)."""
        path = WarehousePaths.from_settings(self.settings).duckdb_path
        with duckdb.connect(str(path), read_only=True) as conn:
            rows = conn.execute(
                "SELECT batch_id FROM ingest_batches ORDER BY flush_seq, received_at"
            ).fetchall()
        return [str(r[0]) for r in rows]


@pytest.fixture
def ingest(tmp_path: Path) -> Iterator[Ingest]:
    with Supervisor(log_dir=tmp_path / "logs") as supervisor:
        yield Ingest(tmp_path, supervisor)


class Simulated:
    """One simulated 8-GPU host serving dcgm-exporter pages at the second `now` says."""

    def __init__(self, tmp_path: Path, clock: Callable[[], float]) -> None:
        spec = FleetSpec(hosts=1, seed=5, scrape_failure_rate=0.0)
        self.sim = FleetSimulator(spec, origin_s=T0, horizon_s=3600)
        self.record_dir = tmp_path / "served"
        self.fleet = ExporterFleet(self.sim, clock, record_dir=self.record_dir).start()
        (self.url,) = self.fleet.urls().values()

    def served_power(self) -> list[tuple[int, int, float]]:
        """(second served, gpu, POWER_USAGE) of every page served with 200, in serving order."""
        out = []
        for line in (self.record_dir / f"{self.sim.hosts[0].name}.jsonl").read_text().splitlines():
            entry = json.loads(line)
            assert entry["status"] == 200
            for family in text_string_to_metric_families(entry["page"]):
                if family.name == "DCGM_FI_DEV_POWER_USAGE":
                    out += [
                        (int(entry["served_at"]), int(s.labels["gpu"]), float(s.value))
                        for s in family.samples
                    ]
        return out


@pytest.fixture
def simulated(tmp_path: Path) -> Iterator[Simulated]:
    now = [float(T0)]
    served = Simulated(tmp_path, lambda: now[0])
    served.clock = now  # type: ignore[attr-defined]
    yield served
    served.fleet.stop()


class RecordingSpool(Spool):
    """The agent's real spool, also noting the id of every batch it seals, in order."""

    def __init__(self, root: Path, *, max_bytes: int) -> None:
        super().__init__(root, max_bytes=max_bytes)
        self.sealed: list[str] = []

    def put_many(self, sealed: Sequence[tuple[str, bytes]]) -> list[SpooledBatch]:
        batches = super().put_many(sealed)
        self.sealed += [batch.batch_id for batch in batches]
        return batches


def stored_gpu_rows(settings: Settings) -> list[tuple[int, int, float]]:
    """(second, gpu, power_w) of every stored gpu_samples row, via the segment reader."""
    conn = reader.connect(settings)
    try:
        rows = conn.execute(
            "SELECT epoch_ms(ts) // 1000, gpu_index, power_w FROM gpu_samples ORDER BY ts, gpu_index"
        ).fetchall()
    finally:
        conn.close()
    return [(int(t), int(g), float(p)) for t, g, p in rows]


def test_ingest_outage_under_load_loses_and_duplicates_nothing(
    tmp_path: Path, simulated: Simulated, ingest: Ingest
) -> None:
    ingest.start()
    agent_settings = load_settings(env={}).with_overrides(
        agent__dcgm_url=simulated.url, agent__ingest_url=ingest.url, agent__token=TOKEN,
        agent__spool_dir=str(tmp_path / "spool"), agent__batch_max_rows=40,
        agent__ship_interval_s=1.0, agent__cgroup_root="", agent__proc_root="",
    )  # fmt: skip
    agent = build_agent(agent_settings)
    agent.host_source = None
    spool = RecordingSpool(tmp_path / "spool", max_bytes=agent.shipper.spool.max_bytes)
    agent.batcher.spool = agent.shipper.spool = spool
    agent.shipper.backoff = Backoff(base_s=0.01, cap_s=0.05)
    tick_no = [0]
    agent.wall_clock = lambda: float(T0 + tick_no[0])
    agent.monotonic = lambda: float(tick_no[0])
    stop = threading.Event()
    sender = threading.Thread(target=agent.shipper.run, args=(stop, 0.01), daemon=True)
    sender.start()

    def scrape(n: int) -> None:
        for _ in range(n):
            tick_no[0] += 1
            simulated.clock[0] = float(T0 + tick_no[0])  # type: ignore[attr-defined]
            assert len(agent.tick()) == 8

    try:
        scrape(30)
        wait_until(lambda: spool.depth == 0, "first batches shipped")
        ingest.stop()  # ingest down: the agent keeps scraping into the spool
        scrape(60)
        unreachable = agent.metrics.errors.labels("ingest_unreachable")
        wait_until(lambda: unreachable._value.get() >= 3, "retries while ingest is down")
        assert spool.depth >= 10
        ingest.start()  # ingest is back: a new process, same port, same data dir
        scrape(30)
        agent.batcher.flush()
        agent.shipper.wakeup.set()
        wait_until(lambda: spool.depth == 0, "spool drained after recovery")
    finally:
        stop.set()
        sender.join()
        for close in agent.closers:  # what Agent.run does last: close kept-alive connections
            close()
    ingest.stop()

    assert ingest.ledger() == spool.sealed  # each batch committed once, in the order sealed
    served = simulated.served_power()
    assert len(served) == 120 * 8
    assert stored_gpu_rows(ingest.settings) == served  # every sample exactly once, same values


def agent_env(tmp_path: Path, exporter_url: str, ingest_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "FLEETSCOPE_CONFIG": "",
        "FLEETSCOPE_AGENT_DCGM_URL": exporter_url,
        "FLEETSCOPE_AGENT_INGEST_URL": ingest_url,
        "FLEETSCOPE_AGENT_TOKEN": TOKEN,
        "FLEETSCOPE_AGENT_SPOOL_DIR": str(tmp_path / "spool"),
        "FLEETSCOPE_AGENT_SDK_SOCKET": str(tmp_path / "agent.sock"),
        "FLEETSCOPE_AGENT_INTERVAL_S": "0.1",
        "FLEETSCOPE_AGENT_SHIP_INTERVAL_S": "0.2",
        "FLEETSCOPE_AGENT_METRICS_PORT": "0",
        "FLEETSCOPE_AGENT_BACKOFF_MAX_S": "0.2",
        "FLEETSCOPE_AGENT_PROC_ROOT": "",
        "FLEETSCOPE_AGENT_CGROUP_ROOT": "",
        "FLEETSCOPE_AGENT_HOST": "node-k",
    }


def test_sigkill_loses_nothing_that_was_spooled(tmp_path: Path, ingest: Ingest) -> None:
    sim = Simulated(tmp_path, time.time)
    env = agent_env(tmp_path, sim.url, ingest.url)  # ingest is down from the start
    command = [sys.executable, "-m", "collector.cli", "run"]
    agent = subprocess.Popen(
        command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    spool = tmp_path / "spool"
    try:
        wait_until(lambda: len(list(spool.glob("*.gpu_samples.*.arrow"))) >= 5, "batches spooled")
    finally:
        agent.send_signal(signal.SIGKILL)
        agent.wait()
        assert agent.stderr is not None
        agent.stderr.close()
    # A SIGKILL mid-write leaves a `.tmp-` file: never a spooled batch (start-up deletes it).
    files = sorted(p for p in spool.glob("*.arrow") if not p.name.startswith(".tmp-"))
    spooled_ids = [path.name.split(".")[2] for path in files]
    spooled_gpu_rows: set[tuple[int, int]] = set()
    for path in files:
        if ".gpu_samples." in path.name:
            table = from_ipc(path.read_bytes())
            ts_ms = table.column("ts").cast(pa.int64()).to_pylist()
            spooled_gpu_rows |= set(zip(ts_ms, table.column("gpu_index").to_pylist(), strict=True))
    assert len(spooled_ids) >= 5 and spooled_gpu_rows

    ingest.start()
    restarted = subprocess.Popen(
        command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        wait_until(lambda: not any(p.exists() for p in files), "spooled batches acknowledged")
    finally:
        restarted.send_signal(signal.SIGTERM)
        _, err = restarted.communicate(timeout=30)
        sim.fleet.stop()
    assert restarted.returncode == 0, err.decode()
    ingest.stop()
    committed = ingest.ledger()
    assert len(committed) == len(set(committed))  # nothing stored twice
    assert committed[: len(spooled_ids)] == spooled_ids  # replayed first, oldest first
    conn = reader.connect(ingest.settings)
    try:
        stored = conn.execute(
            "SELECT epoch_ms(ts), gpu_index FROM gpu_samples WHERE host = 'node-k'"
        ).fetchall()
    finally:
        conn.close()
    keys = [(int(ts), int(gpu)) for ts, gpu in stored]
    assert len(keys) == len(set(keys))  # no (ts, GPU) twice
    assert spooled_gpu_rows <= set(keys)  # every spooled sample arrived
