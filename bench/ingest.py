"""Ingest throughput end to end: many simulated agents POST gpu_samples batches over real HTTP.

    .venv/bin/python -m bench.ingest            # full run (about 1-2 minutes on 2 cores)
    .venv/bin/python -m bench.ingest --quick    # small run

What is measured: wall time from the moment every agent starts posting until the last batch is
answered 202 (answered = committed, see warehouse/ingest/server.py), for `--agents` agents spread over
`--procs` client processes, each posting `--batches` distinct batches of 8 GPUs x `--timestamps`
samples, one request at a time on a kept-alive connection, exactly as the collector ships. The
server runs in its own process. Values/s counts VALUE_COLUMNS["gpu_samples"] (26) per row.
Afterwards the segments are read back through warehouse.read.reader from this (third) process: every
(host, GPU, ts) must be there exactly once (zero loss, zero duplicates), and every agent re-sends
its first batch, which must come back duplicate=true without adding rows.

Peer, same run: a naive ingest server with the same wire format and validation that inserts each
request's rows with DuckDB `executemany` and commits once per request (what the design forbids).
It gets fewer batches per agent (--baseline-batches) because it is slow; the figure is a rate.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing as mp
import os
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier, Event
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from fleetscope.contract import VALUE_COLUMNS, to_ipc

VALUES_PER_ROW = len(VALUE_COLUMNS["gpu_samples"])
TOKEN = "bench-" + "0" * 26  # loopback only; the server needs one since server.tokens went empty
GPUS = 8


@dataclass(frozen=True)
class Load:
    agents: int
    procs: int
    batches: int
    timestamps: int

    @property
    def rows(self) -> int:
        return self.agents * self.batches * self.timestamps * GPUS


# -- servers (each in its own process) -------------------------------------------------------
def serve_fleetscope(
    data_dir: str, overrides: dict[str, Any], ready: Connection, stop: Event
) -> None:
    from fleetscope.settings import load_settings
    from warehouse.ingest.runtime import Server

    settings = load_settings(env={}).with_overrides(core__data_dir=data_dir, **overrides)
    server = Server(settings, port=0)
    server.start()
    ready.send(server.url)
    stop.wait()
    server.stop()


def serve_naive(data_dir: str, ready: Connection, stop: Event) -> None:
    """The peer: per request, decode + conform, then executemany and one commit."""
    import duckdb

    from fleetscope.contract import TABLES, conform, from_ipc
    from warehouse.storage.schema import create_table_sql

    conn = duckdb.connect(str(Path(data_dir) / "naive.duckdb"))
    conn.execute(create_table_sql("gpu_samples", TABLES["gpu_samples"]))
    columns = TABLES["gpu_samples"].names
    insert = f"INSERT INTO gpu_samples VALUES ({', '.join('?' for _ in columns)})"
    lock = threading.Lock()

    class Naive(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            data = conform("gpu_samples", from_ipc(body))
            rows = [
                tuple(dict(v) if k == "extra" and v is not None else v for k, v in r.items())
                for r in data.to_pylist()
            ]
            with lock:
                conn.execute("BEGIN TRANSACTION")
                conn.executemany(insert, rows)
                conn.execute("COMMIT")
            answer = f'{{"rows": {len(rows)}, "duplicate": false}}'.encode()
            self.send_response(202)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    ThreadingHTTPServer.request_queue_size = 512  # as the real server: no resets under load
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Naive)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    ready.send(f"http://127.0.0.1:{httpd.server_address[1]}")
    stop.wait()
    httpd.shutdown()
    conn.close()


# -- agents ----------------------------------------------------------------------------------
def _bodies(agent: int, load: Load, batches: int) -> list[tuple[str, bytes]]:
    from simulator.maker.batches import EPOCH_MS, gpu_batch

    base = gpu_batch(
        f"host-{agent:05d}", timestamps=load.timestamps, job_id=f"job-{agent % 97}", seed=agent
    )
    ts = base.column("ts").cast(pa.int64())
    out = []
    for i in range(batches):
        shift = pa.scalar(EPOCH_MS + i * load.timestamps * 1000 - EPOCH_MS, pa.int64())
        moved = pc.add(ts, shift).cast(pa.timestamp("ms", tz="UTC"))
        out.append((uuid.uuid4().hex, to_ipc(base.set_column(0, "ts", moved))))
    return out


def run_agents(
    url: str, load: Load, batches: int, proc: int, start: Barrier, results: Connection
) -> None:
    from simulator.wire import headers_for, post

    mine = [a for a in range(load.agents) if a % load.procs == proc]
    prepared = {a: _bodies(a, load, batches) for a in mine}
    host, port = url.removeprefix("http://").split(":")
    tallies: dict[str, int] = {"rows": 0, "duplicates": 0, "errors": 0, "retried": 0}
    lock = threading.Lock()

    def agent(a: int) -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        rows = dups = errors = retried = 0
        sends = [*prepared[a], prepared[a][0]]  # the last one re-sends the first batch
        for batch_id, body in sends:
            while True:
                answer = post(conn, "/v1/batches/gpu_samples", body, headers_for(batch_id, TOKEN))
                if answer.status == 503:  # backpressure: wait and retry with the same id
                    retried += 1
                    time.sleep(float(answer.headers.get("retry-after", "1")))
                    continue
                break
            if answer.status != 202:
                errors += 1
            elif answer.body.get("duplicate"):
                dups += 1
            else:
                rows += int(str(answer.body["rows"]))
        conn.close()
        with lock:
            for key, value in (
                ("rows", rows),
                ("duplicates", dups),
                ("errors", errors),
                ("retried", retried),
            ):
                tallies[key] += value

    threads = [threading.Thread(target=agent, args=(a,)) for a in mine]
    start.wait()
    cpu_before = time.process_time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    tallies["cpu_ms"] = int((time.process_time() - cpu_before) * 1000)
    results.send(tallies)


def drive(url: str, load: Load, batches: int, server_pid: int) -> tuple[float, dict[str, int]]:
    """Run the agents; wall seconds and summed tallies (server_cpu_ms: the server's CPU time)."""
    import psutil

    server = psutil.Process(server_pid)
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(load.procs + 1)
    pipes = [ctx.Pipe(duplex=False) for _ in range(load.procs)]
    procs = [
        ctx.Process(target=run_agents, args=(url, load, batches, p, start, pipes[p][1]))
        for p in range(load.procs)
    ]
    for p in procs:
        p.start()
    start.wait()  # every client has its bodies ready
    began = time.perf_counter()
    cpu = server.cpu_times()
    tallies = [recv.recv() for recv, _send in pipes]
    elapsed = time.perf_counter() - began
    cpu_after = server.cpu_times()
    for p in procs:
        p.join()
    total = {k: sum(t[k] for t in tallies) for k in tallies[0]}
    total["server_cpu_ms"] = int((cpu_after.user + cpu_after.system - cpu.user - cpu.system) * 1000)
    return elapsed, total


def report(name: str, elapsed: float, tally: dict[str, int]) -> float:
    rate = tally["rows"] * VALUES_PER_ROW / elapsed
    server_s, clients_s = tally["server_cpu_ms"] / 1000, tally["cpu_ms"] / 1000
    print(
        f"{name}: {tally['rows']} rows in {elapsed:.2f} s = {tally['rows'] / elapsed:,.0f} "
        f"rows/s = {rate:,.0f} values/s\n"
        f"  CPU: server {server_s:.1f} s ({server_s / elapsed:.0%} of one core), agents "
        f"{clients_s:.1f} s; {tally['rows'] * VALUES_PER_ROW / server_s:,.0f} values per "
        f"server CPU-second; load average {os.getloadavg()[0]:.1f} at the end"
    )
    return rate


def check_store(data_dir: str, load: Load) -> tuple[int, int]:
    """(rows, distinct (host, gpu, ts)) read back through the segments from this process."""
    from warehouse.read.reader import open_segments

    conn = open_segments(Path(data_dir) / "segments")
    rows, distinct = conn.execute(
        "SELECT count(*), count(DISTINCT (host, gpu_index, ts)) FROM gpu_samples"
    ).fetchall()[0]
    return int(rows), int(distinct)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small run")
    parser.add_argument("--agents", type=int, default=128)
    parser.add_argument("--procs", type=int, default=4, help="client processes")
    parser.add_argument("--batches", type=int, default=40, help="batches per agent")
    parser.add_argument("--timestamps", type=int, default=60, help="samples per GPU per batch")
    parser.add_argument("--baseline-agents", type=int, default=16)
    parser.add_argument("--baseline-batches", type=int, default=1)
    parser.add_argument("--no-baseline", action="store_true", help="skip the peer")
    parser.add_argument("--flush-rows", type=int, default=20_000)
    parser.add_argument("--flush-interval-s", type=float, default=1.0)
    args = parser.parse_args(argv)
    if args.quick:
        args.agents, args.batches, args.baseline_agents = 32, 8, 8
    load = Load(args.agents, args.procs, args.batches, args.timestamps)
    ctx = mp.get_context("spawn")
    print(
        f"load: {load.agents} agents in {load.procs} processes, {load.batches} batches each of "
        f"{GPUS} GPUs x {load.timestamps} samples ({GPUS * load.timestamps} rows, "
        f"{GPUS * load.timestamps * VALUES_PER_ROW} values); flush_rows={args.flush_rows}, "
        f"flush_interval_s={args.flush_interval_s}"
    )
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as data_dir:
        recv, send = ctx.Pipe(duplex=False)
        stop = ctx.Event()
        overrides = {
            "server__tokens": TOKEN,
            "warehouse__flush_rows": args.flush_rows,
            "warehouse__flush_interval_s": args.flush_interval_s,
            "warehouse__maintenance_interval_s": 3600.0,
        }
        server = ctx.Process(target=serve_fleetscope, args=(data_dir, overrides, send, stop))
        server.start()
        url = recv.recv()
        assert server.pid is not None
        elapsed, tally = drive(url, load, load.batches, server.pid)
        stop.set()
        server.join()
        rows, distinct = check_store(data_dir, load)
        rate = report("fleetscope", elapsed, tally)
        print(
            f"  errors {tally['errors']}, 503 retries {tally['retried']}, re-sent batches "
            f"answered duplicate {tally['duplicates']}/{load.agents}"
        )
        ok = rows == distinct == load.rows and tally["duplicates"] == load.agents
        print(
            f"  store: {rows} rows, {distinct} distinct (host, gpu, ts), expected {load.rows}: "
            f"{'zero loss, zero duplicates' if ok else 'MISMATCH'}"
        )

        if args.no_baseline:
            return 0 if ok else 1
        recv, send = ctx.Pipe(duplex=False)
        stop = ctx.Event()
        naive = ctx.Process(target=serve_naive, args=(data_dir, send, stop))
        naive.start()
        url = recv.recv()
        base_load = Load(args.baseline_agents, load.procs, args.baseline_batches, load.timestamps)
        assert naive.pid is not None
        base_elapsed, base_tally = drive(url, base_load, base_load.batches, naive.pid)
        stop.set()
        naive.join()
        base_rate = report("naive executemany, commit per request", base_elapsed, base_tally)
        print(f"speed-up: {rate / base_rate:.1f}x")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
