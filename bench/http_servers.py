"""Our ThreadingHTTPServer against uvicorn with h11, serving the same handler logic: cost per batch.

    .venv/bin/python -m bench.http_servers                 # 8 clients x 250 batches, 3 rounds
    .venv/bin/python -m bench.http_servers --quick         # 4 x 50, 1 round

Why (issue 28): keep the standard library's server only if a well-kept one costs more per batch.
Both servers run in their own process and call the same route functions of warehouse.ingest.server
(`post_batch`: token check, envelope, strict framing, Arrow decode with the budgets, conform)
behind a writer that acknowledges at once (`NullSink`), so what differs is only the HTTP layer:
http.server's thread per connection, or uvicorn's event loop with the pure-Python h11 parser
(httptools, its C parser, is not installed here). The clients are separate processes, each one
kept-alive connection POSTing distinct gpu_samples batches (8 GPUs x 10 timestamps, what an agent
ships) one at a time. Measured per round: the server process's CPU seconds (user + system, from
/proc via psutil) per batch, and batches per second of wall time. Rounds alternate the servers.
"""

from __future__ import annotations

import argparse
import asyncio
import email.message
import http.client
import multiprocessing as mp
import os
import statistics
import time
from datetime import UTC, datetime
from typing import Any

import psutil
import pyarrow as pa

from bench.fuzz import free_port
from fleetscope.contract import to_ipc
from fleetscope.errors import FleetscopeError, IngestError
from simulator.maker.batches import EPOCH_MS, gpu_batch
from simulator.wire import headers_for

TOKEN = "bench-http-" + "0123456789abcdef" * 2


class NullSink:
    """A writer that acknowledges every batch at once: the HTTP layer and decoding only."""

    queued_rows = 0

    def __init__(self) -> None:
        from warehouse.storage.writer import WriterStats

        self.stats = WriterStats()

    def submit(
        self, table: str, data: pa.Table, batch_id: str, agent: str = "", agent_version: str = ""
    ) -> tuple[Any, bool]:
        from warehouse.ingest.batch_queue import Ticket

        ticket = Ticket(batch_id, table, data.num_rows, agent, data, datetime.now(UTC))
        ticket._resolve()
        return ticket, False


def _ingest() -> Any:
    from warehouse.ingest.auth import TokenChecker
    from warehouse.ingest.metrics import ServerMetrics
    from warehouse.ingest.server import Ingest, IngestConfig

    sink = NullSink()
    config = IngestConfig(max_body_bytes=64 << 20, commit_timeout_s=30.0)
    return Ingest(sink, None, TokenChecker([TOKEN], None), ServerMetrics(sink), config)  # type: ignore[arg-type]


class AsgiRequest:
    """What a route function reads of a request (warehouse.ingest.server.Handler's surface)."""

    def __init__(self, path: str, headers: email.message.Message, body: bytes) -> None:
        self.path = path
        self.headers = headers
        self.body = body

    def read_body(self, limit: int) -> bytes:
        from warehouse.ingest.framing import body_length

        length = body_length(self.headers)
        if length is None:
            raise IngestError("Content-Length is required", status=411)
        if length > limit:
            raise IngestError(f"body of {length} bytes is over the limit", status=413)
        return self.body


def asgi_app(ingest: Any) -> Any:
    from warehouse.ingest.response import Response
    from warehouse.ingest.server import ROUTES

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        headers = email.message.Message()
        for name, value in scope["headers"]:
            headers[name.decode("latin-1")] = value.decode("latin-1")
        request = AsgiRequest(scope["path"], headers, b"".join(chunks))
        try:
            for method, pattern, _, fn in ROUTES:
                match = pattern.fullmatch(scope["path"])
                if match and method == scope["method"]:
                    response = fn(request, ingest, *match.groups())
                    break
            else:
                raise IngestError("no route", status=404)
        except IngestError as exc:
            response = Response.json(exc.status, {"error": str(exc)})
        except FleetscopeError as exc:
            response = Response.json(400, {"error": str(exc)})
        await send(
            {
                "type": "http.response.start",
                "status": response.status,
                "headers": [(b"content-type", response.content_type.encode())],
            }
        )
        await send({"type": "http.response.body", "body": response.body})

    return app


def serve(kind: str, port: int) -> None:
    ingest = _ingest()
    if kind == "threading":
        from warehouse.ingest.server import IngestHTTPServer

        IngestHTTPServer(("127.0.0.1", port), ingest).serve_forever()
    else:
        import uvicorn

        config = uvicorn.Config(
            asgi_app(ingest), host="127.0.0.1", port=port, http="h11", lifespan="off",
            log_level="warning", access_log=False, loop="asyncio",
        )  # fmt: skip
        asyncio.run(uvicorn.Server(config).serve())


def client(port: int, index: int, batches: int, bodies: list[bytes], start: Any) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    start.wait()
    for n in range(batches):
        conn.request("POST", "/v1/batches/gpu_samples", bodies[n % len(bodies)],
                     headers_for(f"c{index}-{n}", TOKEN))  # fmt: skip
        response = conn.getresponse()
        response.read()
        assert response.status == 202, response.status
    conn.close()


def one_round(kind: str, clients: int, batches: int, bodies: list[bytes]) -> tuple[float, float]:
    """(server CPU microseconds per batch, batches per second)."""
    port = free_port()
    server = mp.Process(target=serve, args=(kind, port), daemon=True)
    server.start()
    deadline = time.monotonic() + 60
    while True:
        try:
            http.client.HTTPConnection("127.0.0.1", port, timeout=1).connect()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    start = mp.Event()
    procs = [mp.Process(target=client, args=(port, i, batches, bodies, start))
             for i in range(clients)]  # fmt: skip
    for proc in procs:
        proc.start()
    time.sleep(0.5)
    watched = psutil.Process(server.pid)
    cpu_before = sum(watched.cpu_times()[:2])
    began = time.monotonic()
    start.set()
    for proc in procs:
        proc.join()
        assert proc.exitcode == 0
    wall_s = time.monotonic() - began
    cpu_s = sum(watched.cpu_times()[:2]) - cpu_before
    server.terminate()
    server.join(30)
    total = clients * batches
    return cpu_s / total * 1e6, total / wall_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--batches", type=int, default=250)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.clients, args.batches, args.rounds = 4, 50, 1
    bodies = [to_ipc(gpu_batch(f"h{i}", start_ms=EPOCH_MS + i * 10_000)) for i in range(16)]
    results: dict[str, list[tuple[float, float]]] = {"threading": [], "uvicorn+h11": []}
    for _ in range(args.rounds):
        for kind in results:
            results[kind].append(one_round(kind, args.clients, args.batches, bodies))
    print(f"{args.clients} clients x {args.batches} batches of {len(bodies[0])} bytes, "
          f"{args.rounds} rounds; load {os.getloadavg()[0]:.1f}")  # fmt: skip
    for kind, rounds in results.items():
        cpu = statistics.median(r[0] for r in rounds)
        rate = statistics.median(r[1] for r in rounds)
        print(f"  {kind:12s} server CPU {cpu:7.0f} us/batch (median; rounds "
              f"{', '.join(f'{r[0]:.0f}' for r in rounds)}), {rate:6.0f} batches/s")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
