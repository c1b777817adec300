"""Fleet mode unit costs, each against its peer in the same run (issue 17).

    .venv/bin/python -m bench.fleet            # about 5-8 minutes on a loaded 2-core machine
    .venv/bin/python -m bench.fleet --quick    # a smaller run

1. Ingest: one fleet gateway process (Iceberg on an S3 server, ledger in PostgreSQL) and one
   embedded server process (DuckDB file), the same agents posting the same batches (8 GPUs x
   `--timestamps` samples, one request at a time per agent, kept-alive connections) for the same
   number of batches. Figures: values/s stored, and server CPU seconds (user + system, psutil)
   per million stored values.
2. Catalog commits: N processes each appending one small file per commit to the same Iceberg
   table as fast as they can (what N gateways did under full load before issue 27); commits/s and
   the share of attempts that conflicted, for N = 1, 2, 4. `--gateways-only`: 3 gateway processes
   under agents, where one committer per table appends every gateway's staged files: commit
   conflicts (the gateways' /metrics), commits/s per table, the committers' pass and merge
   seconds, and data files per partition per hour: written by the log flushes, committed (after
   the committer's merge) and after one compaction, with N = 1 and 3 of the above as the peer.
   `--gateway-batches N` makes that run longer.
3. Analyzers: `--days` days x `--clusters` clusters x `--gpus` GPUs per cluster at 10 s written as
   Iceberg partitions, then the per-partition task body (analyzers.run.fleet.analyze_partition_with,
   what a Celery worker runs) on a process pool of 1, 2 and 4 processes; wall time per pool size,
   and the 7 days x 1,000 GPUs figure extrapolated linearly from the measured seconds per row.

The S3 server is moto's server mode on loopback: object-store latency is far below a real one's,
so gateway figures are an upper bound on the CPU side and say nothing about S3 round trips.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pyarrow as pa
from sqlalchemy import create_engine, func, select, text

from fleetscope.contract import VALUE_COLUMNS, to_ipc

VALUES_PER_ROW = len(VALUE_COLUMNS["gpu_samples"])
ROOT = Path(__file__).parents[1]
PG_ADMIN = "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres"
TOKEN = "bench-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer")


def env_for(values: dict[str, Any]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCOPE_")}
    for key, value in values.items():
        env["FLEETSCOPE_" + key.upper().replace(".", "_")] = str(value)
    return env


# -- 1. ingest ---------------------------------------------------------------------------------
def bodies(agents: int, batches: int, timestamps: int) -> list[list[tuple[str, bytes]]]:
    from simulator.maker.batches import EPOCH_MS, gpu_batch

    out = []
    for a in range(agents):
        mine = []
        for i in range(batches):
            batch = gpu_batch(
                f"host-{a:04d}",
                start_ms=EPOCH_MS + i * timestamps * 1000,
                timestamps=timestamps,
                cluster=f"c{a % 2}",
                seed=a * 1000 + i,
            )
            mine.append((uuid.uuid4().hex, to_ipc(batch)))
        out.append(mine)
    return out


def drive(url: str, load: list[list[tuple[str, bytes]]]) -> float:
    from simulator.wire import headers_for

    host, port = url.removeprefix("http://").split(":")

    def agent(mine: list[tuple[str, bytes]]) -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        for batch_id, body in mine:
            while True:
                conn.request("POST", "/v1/batches/gpu_samples", body, headers_for(batch_id, TOKEN))
                resp = conn.getresponse()
                resp.read()
                if resp.status == 202:
                    break
                time.sleep(0.2)
        conn.close()

    threads = [threading.Thread(target=agent, args=(m,)) for m in load]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - started


def serve(values: dict[str, Any], port: int, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "app.cli", "server", "--port", str(port)],
            env=env_for(values),
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=out,
        )


def cpu_s(proc: subprocess.Popen[bytes]) -> float:
    t = psutil.Process(proc.pid).cpu_times()
    return float(t.user + t.system)


def bench_ingest(
    fleet: dict[str, Any], work: Path, agents: int, batches: int, timestamps: int
) -> dict[str, dict[str, float]]:
    load = bodies(agents, batches, timestamps)
    values = agents * batches * timestamps * 8 * VALUES_PER_ROW
    common = {"server.tokens": TOKEN, "server.plugins": "", "warehouse.flush_interval_s": 0.05}
    modes = {
        "embedded": {**common, "server.mode": "embedded", "core.data_dir": work / "embedded"},
        "fleet gateway": {**common, **fleet, "core.data_dir": work / "fleet"},
    }
    out = {}
    for name, values_ in modes.items():
        port = free_port()
        proc = serve(values_, port, work / f"{name.replace(' ', '-')}.log")
        try:
            wait_http(f"http://127.0.0.1:{port}/healthz")
            before = cpu_s(proc)
            wall = drive(f"http://127.0.0.1:{port}", load)
            used = cpu_s(proc) - before
        finally:
            proc.terminate()
            proc.wait(timeout=60)
        out[name] = {
            "values_per_s": values / wall,
            "cpu_s_per_million_values": used / values * 1e6,
            "wall_s": wall,
        }
    return out


def files_per_partition(fleet: dict[str, Any], wall_s: float) -> dict[str, float]:
    """Data files per (day, cluster) partition of gpu_samples after the gateway's ingest run, then
    after one compaction pass (warehouse.fleet.upkeep.compact, what the hourly upkeep runs); the
    most in any partition, and how long the run that wrote them took."""
    from fleetscope.settings import load_settings
    from warehouse.fleet.tables import FleetConfig, FleetTables
    from warehouse.fleet.upkeep import compact, file_count, partitions

    tables = FleetTables(FleetConfig.from_settings(load_settings(env=env_for(fleet))))
    parts = partitions(tables, "gpu_samples")
    before = [file_count(tables, part) for part in parts]
    for part in parts:
        compact(tables, part)
    after = [file_count(tables, part) for part in parts]
    return {
        "partitions": len(parts),
        "files_before": max(before, default=0),
        "files_after": max(after, default=0),
        "run_s": wall_s,
    }


# -- 2. catalog commits ------------------------------------------------------------------------
def committer(fleet: dict[str, Any], seconds: float, start: Any, results: Any) -> None:
    import logging

    from pyiceberg.exceptions import CommitFailedException

    from fleetscope.settings import load_settings
    from simulator.maker.batches import gpu_batch
    from warehouse.fleet.tables import FleetConfig, FleetTables, to_table_schema

    retried = [0]

    class CountRetries(logging.Handler):
        """pyiceberg retries a conflicting commit itself (commit.retry.num-retries, 4) and logs
        each retry: those are the conflicts a gateway never sees."""

        def emit(self, record: logging.LogRecord) -> None:
            if "concurrent update" in record.getMessage():
                retried[0] += 1

    logging.getLogger("pyiceberg").addHandler(CountRetries())
    logging.getLogger("pyiceberg").propagate = False
    tables = FleetTables(FleetConfig.from_settings(load_settings(env=env_for(fleet))))
    table = tables.table("gpu_samples")
    rows = to_table_schema(gpu_batch("commit-bench", timestamps=2), table)
    commits = conflicts = 0
    start.wait()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            table.append(rows)
            commits += 1
        except CommitFailedException:
            conflicts += 1
            table.refresh()
    results.put((commits, conflicts + retried[0]))


def bench_commits(
    fleet: dict[str, Any], seconds: float, counts: tuple[int, ...] = (1, 2, 4)
) -> dict[int, dict[str, float]]:
    ctx = mp.get_context("spawn")
    out = {}
    for n in counts:
        start, results = ctx.Barrier(n + 1), ctx.Queue()
        procs = [
            ctx.Process(target=committer, args=(fleet, seconds, start, results)) for _ in range(n)
        ]
        for p in procs:
            p.start()
        start.wait()
        got = [results.get(timeout=seconds + 120) for _ in procs]
        for p in procs:
            p.join()
        commits, conflicts = sum(c for c, _ in got), sum(f for _, f in got)
        out[n] = {
            "commits_per_s": commits / seconds,
            "conflict_share": conflicts / max(1, commits + conflicts),
        }
    return out


# -- 2b. three gateways, one committer per table (issue 27) ------------------------------------
def metric(url: str, name: str) -> float:
    """One unlabelled sample of a gateway's /metrics."""
    request = urllib.request.Request(url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=30) as resp:
        lines = resp.read().decode().splitlines()
    return sum(float(x.split()[-1]) for x in lines if x.split(" ")[0] == name)


def bench_gateways(
    fleet: dict[str, Any], work: Path, agents: int, batches: int, timestamps: int, gateways: int = 3
) -> dict[str, object]:
    """`gateways` gateway processes under `agents` agents (spread over them) posting `batches`
    batches each: Iceberg commit conflicts counted by the gateways (pyiceberg
    CommitFailedException retries, /metrics), commits per second on gpu_samples (its snapshots
    over the run until every acknowledged row was committed), and data files per (day, cluster)
    partition per hour of ingest: written by the gateways' log flushes, committed (after the
    committer's merge, before compaction) and after one compaction pass."""
    from sqlalchemy import create_engine

    from fleetscope.settings import load_settings
    from warehouse.catalog import staging
    from warehouse.fleet.tables import FLUSH_PROPERTY, FleetConfig, FleetTables
    from warehouse.fleet.upkeep import compact, file_count, partitions

    values = {**fleet, "server.tokens": TOKEN, "server.plugins": "", "core.data_dir": work / "gw"}
    values["warehouse.flush_interval_s"] = 0.05
    tables = FleetTables(FleetConfig.from_settings(load_settings(env=env_for(values))))
    tables.ensure_all()
    ports = [free_port() for _ in range(gateways)]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    procs = []
    try:
        for port, url in zip(ports, urls, strict=True):
            procs.append(serve(values, port, work / f"gateway-{port}.log"))
            try:
                wait_http(url + "/healthz", 300)
            except RuntimeError:
                print((work / f"gateway-{port}.log").read_text()[-3000:], file=sys.stderr)
                raise
        load = bodies(agents, batches, timestamps)
        rows = agents * batches * timestamps * 8
        started = time.perf_counter()
        threads = [
            threading.Thread(target=drive, args=(urls[g], load[g::gateways]))
            for g in range(gateways)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        acked_s = time.perf_counter() - started
        engine = create_engine(fleet["warehouse.catalog_url"])
        table = tables.table("gpu_samples")
        while True:  # every acknowledged row committed (the logs flushed, the committer passed)
            with engine.connect() as conn:
                waiting = staging.waiting(conn, "gpu_samples")
            committed = sum(t.file.record_count for t in table.refresh().scan().plan_files())
            if waiting == 0 and committed >= rows:
                break
            if time.perf_counter() - started > acked_s + 300:
                raise RuntimeError(f"{committed} of {rows} rows committed after 300 s")
            time.sleep(0.2)
        run_s = time.perf_counter() - started
        engine.dispose()
        conflicts = sum(metric(u, "fleetscope_iceberg_commit_conflicts_total") for u in urls)
        gateway_commits = sum(metric(u, "fleetscope_iceberg_commits_total") for u in urls)
        tier_merges = sum(metric(u, "fleetscope_iceberg_tier_merges_total") for u in urls)
        pass_s = sum(metric(u, "fleetscope_iceberg_commit_pass_seconds_total") for u in urls)
        merge_s = sum(metric(u, "fleetscope_iceberg_merge_seconds_total") for u in urls)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=120)
    commits = [
        s for s in table.refresh().snapshots() if s.summary and s.summary.get(FLUSH_PROPERTY)
    ]
    parts = partitions(tables, "gpu_samples")
    flushed, merged = written_files(tables, fleet["warehouse.catalog_url"])
    before = {p: file_count(tables, p) for p in parts}
    kib_before = committed_kib(tables)
    for part in parts:
        compact(tables, part)
    after = {p: file_count(tables, p) for p in parts}
    per_hour = 3600 / run_s
    return {
        "gateways": gateways,
        "agents": agents,
        "rows": rows,
        "acked_s": acked_s,
        "run_s": run_s,
        "commit_conflicts": conflicts,
        "gpu_samples_commits": len(commits),
        "commits_per_s_per_table": len(commits) / run_s,
        "committer_commits_all_tables": gateway_commits,
        "tier_merges": tier_merges,
        "commit_pass_s": pass_s,
        "merge_s": merge_s,
        "partitions": len(parts),
        "flush_files_per_partition_max": max(flushed.values(), default=0),
        "flush_files_per_partition_per_hour": max(flushed.values(), default=0) * per_hour,
        "merged_files_per_partition_max": max(merged.values(), default=0),
        "files_per_partition_max_before": max(before.values(), default=0),
        "files_per_partition_per_hour_before": max(before.values(), default=0) * per_hour,
        "files_per_partition_max_after": max(after.values(), default=0),
        "file_kib_before": kib_before,
        "file_kib_after": committed_kib(tables),
    }


def written_files(tables: Any, catalog_url: str) -> tuple[dict[str, int], dict[str, int]]:
    """Per partition of gpu_samples: the data files the gateways' log flushes wrote, and the files
    the committers' merges wrote (warehouse.fleet.merge). Counted from the object store (no
    sweep has run, so every flush file is still there) less the merged files the staging table
    names (their writer is '<gateway>:merge')."""
    from warehouse.catalog.staging import staged_files
    from warehouse.fleet.orphans import stored

    engine = create_engine(catalog_url)
    c = staged_files.c
    with engine.connect() as conn:
        query = (
            select(c.partition, func.count())
            .where(c.table_name == "gpu_samples", c.gateway.like("%:merge"))
            .group_by(c.partition)
        )
        merged = {str(p): int(n) for p, n in conn.execute(query)}
    engine.dispose()
    written: dict[str, int] = {}
    for f in stored(tables.table("gpu_samples")):
        if "/data/" in f.uri and f.uri.endswith(".parquet"):
            part = f.uri.split("/data/", 1)[1].rsplit("/", 1)[0]
            written[part] = written.get(part, 0) + 1
    return {p: n - merged.get(p, 0) for p, n in written.items()}, merged


def committed_kib(tables: Any) -> list[float]:
    """Sizes in KiB of gpu_samples' live data files (before compaction)."""
    table = tables.table("gpu_samples")
    table.refresh()
    return sorted(round(t.file.file_size_in_bytes / 1024, 1) for t in table.scan().plan_files())


# -- 3. analyzers ------------------------------------------------------------------------------
def write_partitions(fleet: dict[str, Any], days: int, clusters: int, gpus: int) -> int:
    from fleetscope.contract import TABLES, conform
    from fleetscope.settings import load_settings
    from simulator.maker.batches import EPOCH_MS
    from warehouse.fleet.tables import FleetConfig, FleetTables, to_table_schema

    tables = FleetTables(FleetConfig.from_settings(load_settings(env=env_for(fleet))))
    table = tables.table("gpu_samples")
    rng = np.random.default_rng(7)
    per_gpu = 8640
    day0 = EPOCH_MS - EPOCH_MS % 86_400_000
    total = 0
    for day in range(days):
        for c in range(clusters):
            n = per_gpu * gpus
            gpu = np.tile(np.arange(gpus), per_gpu)
            ts = day0 + day * 86_400_000 + np.repeat(np.arange(per_gpu), gpus) * 10_000
            util = np.where(gpu % 4 == 0, 0.0, rng.uniform(5, 95, n))
            data = pa.table(
                {
                    "ts": pa.array(ts, pa.timestamp("ms", tz="UTC")),
                    "cluster": [f"c{c}"] * n,
                    "host": [f"c{c}-h{g // 8}" for g in gpu],
                    "gpu_index": pa.array(gpu % 8, pa.int16()),
                    "job_id": [f"c{c}-job{g // 4}" for g in gpu],
                    "gpu_util": util,
                    "sm_active": util / 100,
                    "fb_used_mib": np.full(n, 20_000.0),
                    "fb_free_mib": np.full(n, 60_000.0),
                }
            )
            table.append(to_table_schema(conform("gpu_samples", data), table))
            total += n
    _ = TABLES
    return total


def _analyze(args: tuple[dict[str, Any], str, str]) -> float:
    from analyzers.run.fleet import analyze_partition_with
    from analyzers.run.runner import Pipeline
    from fleetscope.settings import load_settings
    from warehouse.fleet.tables import FleetConfig, FleetTables

    fleet, day, cluster = args
    tables = FleetTables(FleetConfig.from_settings(load_settings(env=env_for(fleet))))
    started = time.perf_counter()
    answer = analyze_partition_with(tables, Pipeline.default(), day, cluster)
    assert not answer["errors"], answer["errors"]
    return time.perf_counter() - started


def bench_analyzers(fleet: dict[str, Any], days: int, clusters: int) -> dict[int, float]:
    from simulator.maker.batches import EPOCH_MS

    day0 = datetime.fromtimestamp(EPOCH_MS / 1000, UTC).date()
    parts = [
        (fleet, (day0 + timedelta(days=d)).isoformat(), f"c{c}")
        for d in range(days)
        for c in range(clusters)
    ]
    out = {}
    ctx = mp.get_context("spawn")
    for workers in (1, 2, 4):
        with ctx.Pool(workers) as pool:
            pool.map(_analyze, parts[:workers])  # imports and table loads, not timed
            started = time.perf_counter()
            pool.map(_analyze, parts, chunksize=1)
            out[workers] = time.perf_counter() - started
    return out


# -- harness -----------------------------------------------------------------------------------
def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench.fleet")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--gateways-only",
        action="store_true",
        help="only 3 gateway processes under agents (one committer per table: conflicts, commits/s, "
        "files per partition per hour before and after compaction) and, as the peer in the same "
        "run, 1 and 3 processes each appending on its own (the design before issue 27)",
    )
    parser.add_argument(
        "--ingest-only", action="store_true", help="only part 1 and the files per partition"
    )
    parser.add_argument(
        "--gateway-batches",
        type=int,
        help="batches per agent in the --gateways-only run (more: a longer run, more commits "
        "per partition, so the committer's tiered merge has ten files of a tier to merge)",
    )
    args = parser.parse_args(argv)
    agents, batches, timestamps = (8, 10, 20) if args.quick else (16, 20, 30)
    days, clusters, gpus = (2, 2, 16) if args.quick else (2, 4, 32)
    commit_s = 5.0 if args.quick else 15.0

    s3_port = free_port()
    moto = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(s3_port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    db = f"fs_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {db}"))
    fleet = {
        "server.mode": "fleet",
        "warehouse.catalog_url": f"postgresql+psycopg2://postgres@127.0.0.1:5432/{db}",
        "fleet.warehouse_uri": "s3://fleetscope-bench/warehouse",
        "fleet.s3_endpoint": f"http://127.0.0.1:{s3_port}",
        "fleet.s3_access_key": "bench",
        "fleet.s3_secret_key": "bench",
    }
    try:
        wait_http(f"http://127.0.0.1:{s3_port}/")
        if args.gateways_only:
            from fleetscope.settings import load_settings
            from warehouse.fleet.tables import FleetConfig, ensure_bucket

            ensure_bucket(FleetConfig.from_settings(load_settings(env=env_for(fleet))))
            load_before = os.getloadavg()
            print("started", datetime.now(UTC).isoformat(timespec="seconds"), flush=True)
            with tempfile.TemporaryDirectory(prefix="fleet-bench-") as work:
                got = bench_gateways(
                    fleet, Path(work), agents, args.gateway_batches or batches, timestamps
                )
            print("three gateways", got, flush=True)
            peer = bench_commits({**fleet, "fleet.namespace": "optimistic"}, commit_s, (1, 3))
            print("peer: processes appending on their own", peer, flush=True)
            print("load before", load_before, "after", os.getloadavg())
            return 0
        with tempfile.TemporaryDirectory(prefix="fleet-bench-") as work:
            load_before = os.getloadavg()
            ingest = bench_ingest(fleet, Path(work), agents, batches, timestamps)
            print("ingest", ingest, flush=True)
            files = files_per_partition(fleet, ingest["fleet gateway"]["wall_s"])
            print("files per partition", files, flush=True)
            if args.ingest_only:
                print("load before", load_before, "after", os.getloadavg())
                return 0
            commits = bench_commits({**fleet, "fleet.namespace": "commits"}, commit_s)
            print("commits", commits, flush=True)
            an_fleet = {**fleet, "fleet.namespace": "analyzers"}
            rows = write_partitions(an_fleet, days, clusters, gpus)
            timing = bench_analyzers(an_fleet, days, clusters)
            full_rows = 7 * 1000 * 8640
            per_row = {w: s / rows for w, s in timing.items()}
            print("analyzers", {"rows": rows, "seconds": timing}, flush=True)
            print(
                "extrapolated 7d x 1,000 GPUs (60,480,000 rows), seconds:",
                {w: round(per_row[w] * full_rows) for w in timing},
            )
            print("load before", load_before, "after", os.getloadavg())
    finally:
        moto.kill()
        moto.wait()
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
        admin.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
