"""Two fleet gateways under agents: one `kill -9`'d, the S3 server stopped mid-ingest (issue 28).

    .venv/bin/python -m bench.fleet_faults              # 4 agents, ~20 s of sealing
    .venv/bin/python -m bench.fleet_faults --agents 8

Each agent is the collector's real spool and shipper (threads of this process) with both gateway
URLs in `agent.ingest_url` (failover on a refused connection or a 5xx), sealing one gpu_samples
batch of unique (host, gpu, ts) rows every `--interval-s`. The gateways are real `fleetscope
server --mode fleet` processes on PostgreSQL (127.0.0.1:5432) and moto's S3 server. During the run
gateway A is killed with SIGKILL (and restarted later), and the S3 server is stopped with SIGSTOP
for `--s3-down-s` seconds (a server that no longer answers; SIGCONT brings it back with its
objects: moto keeps them in memory, so killing it would lose them by construction). After the
agents stop sealing, every spool must drain, and the gpu_samples Iceberg table, read back, must
hold every sealed row exactly once.
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
from pathlib import Path

from sqlalchemy import create_engine, text

from bench.faults import FleetOfAgents
from bench.fleet import PG_ADMIN, env_for, wait_http
from bench.fuzz import free_port

TOKEN = "faults-" + "0" * 24  # bench.faults' agents present this one


def gateway(values: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "app.cli", "server", "--mode", "fleet", "--port", str(port)],
            env=env_for(values), stdout=subprocess.DEVNULL, stderr=out,
        )  # fmt: skip


def stored(values: dict[str, str]) -> tuple[int, int]:
    """(rows, distinct (host, gpu_index, ts)) of the fleet's gpu_samples table."""
    import pyarrow.compute as pc

    from fleetscope.settings import load_settings
    from warehouse.fleet.tables import FleetConfig, FleetTables

    settings = load_settings(env=env_for(values))
    table = FleetTables(FleetConfig.from_settings(settings)).table("gpu_samples")
    rows = table.refresh().scan(selected_fields=("host", "gpu_index", "ts")).to_arrow()
    keys = pc.binary_join_element_wise(
        pc.cast(rows["host"], "string"),
        pc.cast(rows["gpu_index"], "string"),
        pc.cast(rows["ts"], "string"),
        "|",
    )
    return rows.num_rows, len(pc.unique(keys))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--interval-s", type=float, default=0.5)
    parser.add_argument("--s3-down-s", type=float, default=5.0)
    args = parser.parse_args(argv)
    s3_port = free_port()
    moto = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(s3_port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    db = f"fs_faults_{uuid.uuid4().hex[:8]}"
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {db}"))
    ports = [free_port(), free_port()]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    with tempfile.TemporaryDirectory(prefix="fleet-faults-") as tmp:
        work = Path(tmp)
        values = {
            "core.data_dir": str(work / "data"),
            "server.mode": "fleet",
            "server.tokens": TOKEN,
            "server.plugins": "",
            "warehouse.catalog_url": f"postgresql+psycopg2://postgres@127.0.0.1:5432/{db}",
            "warehouse.flush_interval_s": "0.2",
            "fleet.warehouse_uri": "s3://fleetscope-faults/warehouse",
            "fleet.s3_endpoint": f"http://127.0.0.1:{s3_port}",
            "fleet.s3_access_key": "faults",
            "fleet.s3_secret_key": "faults",
        }
        procs: list[subprocess.Popen[bytes]] = []
        fleet = None
        try:
            wait_http(f"http://127.0.0.1:{s3_port}/")
            procs = [gateway(values, p, work / f"gateway-{p}.log") for p in ports]
            for url in urls:
                wait_http(url + "/healthz", 180)
            fleet = FleetOfAgents(work, ",".join(urls), args.agents, args.interval_s)
            fleet.start()
            time.sleep(4)
            procs[0].send_signal(signal.SIGKILL)  # gateway A, mid-ingest
            procs[0].wait()
            time.sleep(2)
            moto.send_signal(signal.SIGSTOP)  # the S3 server stops answering
            time.sleep(args.s3_down_s)
            moto.send_signal(signal.SIGCONT)
            procs[0] = gateway(values, ports[0], work / f"gateway-{ports[0]}.log")
            wait_http(urls[0] + "/healthz", 180)
            time.sleep(2)
            fleet.stop_sealing.set()
            started = time.monotonic()
            while fleet.pending() and time.monotonic() - started < 300:
                for shipper in fleet.shippers:
                    shipper.wakeup.set()
                time.sleep(0.2)
            drain_s = time.monotonic() - started
            pending = fleet.pending()
            fleet.stop()
            rows, distinct = stored(values)
            print(
                f"{args.agents} agents, {fleet.batches} batches, {fleet.sealed_rows} rows sealed; "
                f"gateway A killed -9 and restarted, S3 stopped {args.s3_down_s:g} s; "
                f"drained in {drain_s:.1f} s, {pending} batches never acknowledged; stored "
                f"{rows} rows, lost {fleet.sealed_rows - distinct}, duplicated {rows - distinct}; "
                f"load {os.getloadavg()[0]:.1f}"
            )
            return (
                0 if (pending, rows, distinct) == (0, fleet.sealed_rows, fleet.sealed_rows) else 1
            )
        finally:
            if fleet is not None:
                fleet.stop()
            for proc in procs:
                if proc.poll() is None:
                    proc.terminate()
                    proc.wait(60)
            moto.send_signal(signal.SIGCONT)
            moto.kill()
            moto.wait()
            with admin.connect() as conn:
                conn.execute(text(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
            admin.dispose()


if __name__ == "__main__":
    raise SystemExit(main())
