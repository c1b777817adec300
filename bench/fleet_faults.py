"""Two fleet gateways under agents: one `kill -9`'d, the S3 server stopped mid-ingest (issue 28).

    .venv/bin/python -m bench.fleet_faults              # 4 agents, ~20 s of sealing
    .venv/bin/python -m bench.fleet_faults --agents 8

tests/fleet/test_fleet_faults.py runs `run` with 2 agents, a 1 s interval and a 4 s S3 outage.

Each agent is the collector's real spool and shipper (threads of this process) with both gateway
URLs in `agent.ingest_url` (failover on a refused connection or a 5xx), sealing one gpu_samples
batch of unique (host, gpu, ts) rows every `--interval-s`. The gateways are real `fleetscope
server --mode fleet` processes on PostgreSQL (127.0.0.1:5432) and moto's S3 server. During the run
gateway A is killed with SIGKILL (and restarted later), and the S3 server is stopped with SIGSTOP
for `--s3-down-s` seconds (a server that no longer answers; SIGCONT brings it back with its
objects: moto keeps them in memory, so killing it would lose them by construction). After the
agents stop sealing, every spool must drain, and the gpu_samples Iceberg table, read back, must
hold every sealed row exactly once. The gateways answer a commit that has not finished within
`warehouse.commit_timeout_s` (2 s here, shorter than the agents' 30 s request timeout) with 503.
Since issue 27 a gateway acknowledges on its own ingest log: an S3 outage delays its flush to
staged files (retried), not its answers, so `answered_5xx` counts only what reached the agents
(often 0); gateway A's acknowledged, unflushed batches are replayed from its log when it restarts.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import create_engine, text

from bench.faults import FleetOfAgents
from bench.fleet import PG_ADMIN, env_for, wait_http
from bench.fuzz import free_port

TOKEN = "faults-" + "0" * 24  # bench.faults' agents present this one


@dataclass(frozen=True)
class FleetFaultResult:
    sealed_rows: int
    stored_rows: int
    distinct_rows: int
    batches: int
    unacknowledged: int  # batches still in a spool when the drain gave up
    answered_5xx: int  # 5xx answers the agents got (and retried), over both gateways
    drain_s: float

    @property
    def lost(self) -> int:
        return self.sealed_rows - self.distinct_rows

    @property
    def duplicated(self) -> int:
        return self.stored_rows - self.distinct_rows


def gateway(values: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "app.cli", "server", "--mode", "fleet", "--port", str(port)],
            env=env_for(values), stdout=subprocess.DEVNULL, stderr=out,
        )  # fmt: skip


def stored(values: dict[str, str]) -> tuple[int, int]:
    """(rows, distinct (host, gpu_index, ts)) of the fleet's gpu_samples table: its snapshot and
    the staged files the committer has not appended yet (what a fleet reader reads)."""
    from datetime import UTC, datetime

    import pyarrow as pa
    import pyarrow.compute as pc

    from fleetscope.settings import load_settings
    from warehouse.fleet.reader import staged_rows
    from warehouse.fleet.tables import FleetConfig, FleetTables

    settings = load_settings(env=env_for(values))
    tables = FleetTables(FleetConfig.from_settings(settings))
    table = tables.table("gpu_samples").refresh()
    columns = ("host", "gpu_index", "ts")
    rows = table.scan(selected_fields=columns).to_arrow().select(list(columns))
    whole = (datetime(1970, 1, 1, tzinfo=UTC), datetime(9999, 1, 1, tzinfo=UTC))
    staged = staged_rows(tables, table, "gpu_samples", *whole, columns)
    if staged is not None:
        rows = pa.concat_tables([rows, staged.select(list(columns)).cast(rows.schema)])
    keys = pc.binary_join_element_wise(
        pc.cast(rows["host"], "string"),
        pc.cast(rows["gpu_index"], "string"),
        pc.cast(rows["ts"], "string"),
        "|",
    )
    return rows.num_rows, len(pc.unique(keys))


@contextmanager
def postgres_database() -> Iterator[str]:
    """A throwaway PostgreSQL database on 127.0.0.1:5432: its URL, dropped afterwards."""
    db = f"fs_faults_{uuid.uuid4().hex[:8]}"
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {db}"))
    try:
        yield f"postgresql+psycopg2://postgres@127.0.0.1:5432/{db}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
        admin.dispose()


def run(
    work: Path, catalog_url: str, *, agents: int, interval_s: float, s3_down_s: float,
    drain_limit_s: float = 300.0,
) -> FleetFaultResult:  # fmt: skip
    """Two gateway processes and a moto S3 process under `agents` agents: kill -9 gateway A,
    stop S3 for `s3_down_s`, restart A, stop sealing, drain the spools, read the table back."""
    s3_port = free_port()
    moto = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(s3_port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    ports = [free_port(), free_port()]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    values = {
        "core.data_dir": str(work / "data"),
        "server.mode": "fleet",
        "server.tokens": TOKEN,
        "server.plugins": "",
        "warehouse.catalog_url": catalog_url,
        "warehouse.flush_interval_s": "0.2",
        "warehouse.commit_timeout_s": "2",
        "fleet.warehouse_uri": "s3://fleetscope-faults/warehouse",
        "fleet.s3_endpoint": f"http://127.0.0.1:{s3_port}",
        "fleet.s3_access_key": "faults",
        "fleet.s3_secret_key": "faults",
    }
    procs: list[subprocess.Popen[bytes]] = []
    fleet = None
    try:
        wait_http(f"http://127.0.0.1:{s3_port}/", 120)
        # One after the other: two gateways starting at once on a fresh catalog sometimes left
        # one silent for minutes (2 starts of 5 here; not diagnosed: it awaited no PostgreSQL lock).
        for port, url in zip(ports, urls, strict=True):
            procs.append(gateway(values, port, work / f"gateway-{port}.log"))
            wait_http(url + "/healthz", 180)
        fleet = FleetOfAgents(work, ",".join(urls), agents, interval_s)
        fleet.start()
        wait_for(lambda: shipped(fleet) >= agents, 120, "as many batches acknowledged as agents")
        procs[0].send_signal(signal.SIGKILL)  # gateway A, mid-ingest
        procs[0].wait()
        time.sleep(2 * interval_s)
        moto.send_signal(signal.SIGSTOP)  # the S3 server stops answering
        time.sleep(s3_down_s)
        moto.send_signal(signal.SIGCONT)
        procs[0] = gateway(values, ports[0], work / f"gateway-{ports[0]}.log")
        wait_http(urls[0] + "/healthz", 180)
        time.sleep(2 * interval_s)
        fleet.stop_sealing.set()
        started = time.monotonic()
        while fleet.pending() and time.monotonic() - started < drain_limit_s:
            for shipper in fleet.shippers:
                shipper.wakeup.set()
            time.sleep(0.2)
        drain_s = time.monotonic() - started
        pending = fleet.pending()
        fleet.stop()
        # An acknowledged batch is readable once its gateway's log is flushed (about 1 s).
        deadline = time.monotonic() + 60
        while (counts := stored(values))[1] < fleet.sealed_rows and time.monotonic() < deadline:
            time.sleep(0.5)
        rows, distinct = counts
        return FleetFaultResult(
            fleet.sealed_rows, rows, distinct, fleet.batches, pending, answered_5xx(fleet), drain_s
        )
    finally:
        if fleet is not None:
            fleet.stop()
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        moto.send_signal(signal.SIGCONT)
        moto.kill()
        moto.wait()


def shipped(fleet: FleetOfAgents) -> int:
    return sum(int(s.metrics.batches_shipped._value.get()) for s in fleet.shippers)


def answered_5xx(fleet: FleetOfAgents) -> int:
    return sum(int(s.metrics.errors.labels("ingest_5xx")._value.get()) for s in fleet.shippers)


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout_s:g} s")
        time.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--interval-s", type=float, default=0.5)
    parser.add_argument("--s3-down-s", type=float, default=5.0)
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="fleet-faults-") as tmp, postgres_database() as url:
        result = run(
            Path(tmp), url, agents=args.agents, interval_s=args.interval_s,
            s3_down_s=args.s3_down_s,
        )  # fmt: skip
    print(
        f"{args.agents} agents, {result.batches} batches, {result.sealed_rows} rows sealed; "
        f"gateway A killed -9 and restarted, S3 stopped {args.s3_down_s:g} s; "
        f"{result.answered_5xx} 5xx answers retried; drained in {result.drain_s:.1f} s, "
        f"{result.unacknowledged} batches never acknowledged; stored {result.stored_rows} rows, "
        f"lost {result.lost}, duplicated {result.duplicated}; load {load_before:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after"
    )
    ok = result.unacknowledged == result.lost == result.duplicated == 0
    return 0 if ok and result.stored_rows == result.sealed_rows else 1


if __name__ == "__main__":
    raise SystemExit(main())
