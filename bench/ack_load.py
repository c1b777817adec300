"""How many concurrent agents one server holds with p99 acknowledgement under 2 s (loopback).

    .venv/bin/python -m bench.ack_load                  # steps 32..512 agents, 20 s each
    .venv/bin/python -m bench.ack_load --steps 32,64 --step-s 10
    .venv/bin/python -m bench.ack_load --to-the-end     # every step, past a p99 of 2 s too

Each simulated agent is a thread with its own kept-alive connection that posts one gpu_samples
batch (8 GPUs x `--samples` samples) every `--period-s` seconds, as the shipper does, and waits
for the 202 (= committed); a 503 is retried after its Retry-After with the same batch id, and the
ack time runs from the first send to the 202 (each agent's first batch, which also registers its
new host in the catalog, is a warm-up and not counted). Agents are spread over `--procs` client processes.
Per step it also reports the 503 rate: the share of all answers that were 503 (each retried).
The load rises step by step until p99 passes 2 s (or the steps end); the server is a real
`fleetscope server` process, `server.max_connections` raised above the agent count so that what
is measured is the server's capacity, not its cap. A real agent ships every agent.ship_interval_s
(5 s): with the default period of 1 s, N agents here stand for about 5 N real ones.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing as mp
import os
import subprocess
import tempfile
import threading
import time
import uuid
from multiprocessing.connection import Connection
from pathlib import Path

TOKEN = "ackload-" + "0" * 24


def _agents(url: str, agents: list[int], args: tuple[float, float, int], out: Connection) -> None:
    from collector.batcher import WIRE_CODEC  # what the agent sends
    from fleetscope.contract import to_ipc
    from simulator.maker.batches import EPOCH_MS, gpu_batch
    from simulator.wire import headers_for, post

    period_s, step_s, samples = args
    host, port = url.removeprefix("http://").split(":")
    latencies: list[float] = []
    errors = [0]
    answers = [0, 0]  # all answers, 503s
    lock = threading.Lock()
    deadline = time.monotonic() + step_s

    def agent(a: int) -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        n = 0
        time.sleep((a % 97) / 97 * period_s)  # spread the first sends over one period
        while time.monotonic() < deadline:
            started = time.monotonic()
            start_ms = EPOCH_MS + (a * 100_000 + n) * samples * 1000
            body = to_ipc(
                gpu_batch(f"load-{a}", start_ms=start_ms, timestamps=samples),
                compression=WIRE_CODEC,
            )
            batch_id = uuid.uuid4().hex
            while True:
                try:
                    answer = post(
                        conn, "/v1/batches/gpu_samples", body, headers_for(batch_id, TOKEN)
                    )
                except (OSError, http.client.HTTPException):
                    conn.close()
                    conn = http.client.HTTPConnection(host, int(port), timeout=60)
                    continue
                with lock:
                    answers[0] += 1
                    answers[1] += answer.status == 503
                if answer.status == 503:
                    time.sleep(float(answer.headers.get("retry-after", "1")))
                    continue
                break
            with lock:
                if answer.status != 202:
                    errors[0] += 1
                elif n > 0:  # the first batch of a new host also registers it in the catalog
                    latencies.append(time.monotonic() - started)
            n += 1
            time.sleep(max(0.0, period_s - (time.monotonic() - started)))
        conn.close()

    threads = [threading.Thread(target=agent, args=(a,)) for a in agents]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out.send((latencies, errors[0], answers))


def step(
    url: str, agents: int, procs: int, period_s: float, step_s: float, samples: int
) -> tuple[str, float]:
    ctx = mp.get_context("spawn")
    pipes = [ctx.Pipe(duplex=False) for _ in range(procs)]
    workers = [
        ctx.Process(
            target=_agents,
            args=(url, list(range(p, agents, procs)), (period_s, step_s, samples), pipes[p][1]),
        )
        for p in range(procs)
    ]
    for worker in workers:
        worker.start()
    results = [recv.recv() for recv, _ in pipes]
    for worker in workers:
        worker.join()
    latencies = sorted(x for lat, _, _ in results for x in lat)
    errors = sum(e for _, e, _ in results)
    answered = sum(a[0] for _, _, a in results)
    refused = sum(a[1] for _, _, a in results)
    if not latencies:
        return f"{agents} agents: no acknowledgement at all; 503 {refused} of {answered}", 1e9

    def q(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))]

    rate = len(latencies) / step_s
    return (
        f"{agents} agents: {len(latencies)} acks ({rate:.0f}/s, {rate * samples * 8:,.0f} rows/s), "
        f"p50 {q(0.5):.3f} s, p99 {q(0.99):.3f} s, max {latencies[-1]:.3f} s, errors {errors}, "
        f"503 {refused} of {answered} answers ({refused / max(answered, 1):.1%}); "
        f"load {os.getloadavg()[0]:.1f}"
    ), q(0.99)


def main(argv: list[str] | None = None) -> int:
    from bench.fuzz import start_server

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", default="32,64,128,256,512")
    parser.add_argument("--step-s", type=float, default=20.0)
    parser.add_argument("--period-s", type=float, default=1.0)
    parser.add_argument("--samples", type=int, default=2, help="samples per GPU per batch")
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument(
        "--max-connections", type=int, default=0,
        help="server.max_connections (default: twice the largest step, so the cap never bites)",
    )  # fmt: skip
    parser.add_argument("--to-the-end", action="store_true", help="run every step, past 2 s too")
    args = parser.parse_args(argv)
    steps = [int(s) for s in args.steps.split(",")]
    print(f"load before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="ackload-", ignore_cleanup_errors=True) as tmp:
        process, url = start_server(
            Path(tmp) / "data", TOKEN,
            FLEETSCOPE_SERVER_MAX_CONNECTIONS=str(args.max_connections or max(steps) * 2),
            FLEETSCOPE_WAREHOUSE_FLUSH_INTERVAL_S="1.0",
        )  # fmt: skip
        try:
            for agents in steps:
                line, p99 = step(url, agents, args.procs, args.period_s, args.step_s, args.samples)
                print(line, flush=True)
                if p99 > 2.0:
                    print(f"p99 passed 2 s at {agents} agents")
                    if not args.to_the_end:
                        break
        finally:
            process.terminate()
            try:
                process.wait(120)
            except subprocess.TimeoutExpired:  # a backlog of hundreds of agents, on a busy box
                print("the server did not stop within 120 s of SIGTERM: killed")
                process.kill()
                process.wait()
    print(f"load after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
