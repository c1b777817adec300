"""The ingest server against well-kept servers, serving the same handler logic: cost per batch.

    .venv/bin/python -m bench.http_servers                 # 8 clients x 150 batches, 5 rounds
    .venv/bin/python -m bench.http_servers --quick         # 4 x 50, 1 round
    git worktree add /tmp/before <commit before the switch>
    .venv/bin/python -m bench.http_servers --peer-tree /tmp/before   # + that tree's server

Why (issue 28): keep the standard library's server only if a well-kept one costs more per batch.
It did not, and the product now runs on uvicorn + httptools: the kind "ingest" is the real
`IngestHTTPServer` (warehouse.ingest.server: its connection cap, header deadline, framing, the
body reserved before it is read, routes on a pool sized from server.max_connections); with
`--peer-tree` pointing at a checkout from before the switch, "ingest@peer" is the
ThreadingHTTPServer it replaced. The adapted kinds below are the bare servers it was chosen from.
All servers run in their own process and call the same route functions of warehouse.ingest.server
(`post_batch`: token check, envelope, strict framing, Arrow decode with the budgets, conform)
behind a writer that acknowledges at once (`NullSink`), so what differs is only the HTTP layer:
http.server's thread per connection; uvicorn's event loop with the pure-Python h11 parser or the
C parser httptools; or waitress (a threaded WSGI server). Our routes block until the writer
commits (Ticket.wait), so on uvicorn a real server must run them off the event loop: the
"+threads" kinds hand each request to a thread pool (`asyncio.to_thread`), reading the body on
the loop first, which is what a switch would cost; the plain uvicorn kinds run the route on the
loop (only possible with this instant writer) as the lower bound. waitress reads the whole body
before calling the application, so it is measured as the WSGI path. The clients are separate
processes, each one kept-alive connection POSTing distinct gpu_samples batches (8 GPUs x 10
timestamps, what an agent ships) one at a time. Measured per round: the server process's CPU
seconds (user + system, from /proc via psutil) per batch, and batches per second of wall time.
Each round runs every server once, in an order rotated from round to round, so a change in the
machine's load is spread over all of them; the report gives median, min and max over rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import email.message
import http.client
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from typing import Any

import psutil
import pyarrow as pa

from bench.fuzz import free_port
from collector.batcher import WIRE_CODEC
from fleetscope.contract import to_ipc
from fleetscope.errors import FleetscopeError, IngestError
from simulator.maker.batches import EPOCH_MS, gpu_batch
from simulator.wire import headers_for

TOKEN = "bench-http-" + "0123456789abcdef" * 2


class NullSink:
    """A writer that acknowledges every batch at once: the HTTP layer and decoding only."""

    queued_rows = 0
    log_fsyncs = 0

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


def route(ingest: Any, method: str, request: Any) -> Any:
    from warehouse.ingest.response import Response
    from warehouse.ingest.server import ROUTES

    try:
        for route_method, pattern, _, fn in ROUTES:
            match = pattern.fullmatch(request.path)
            if match and route_method == method:
                return fn(request, ingest, *match.groups())
        raise IngestError("no route", status=404)
    except IngestError as exc:
        return Response.json(exc.status, {"error": str(exc)})
    except FleetscopeError as exc:
        return Response.json(400, {"error": str(exc)})


def asgi_app(ingest: Any, threads: bool) -> Any:
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
        if threads:
            response = await asyncio.to_thread(route, ingest, scope["method"], request)
        else:
            response = route(ingest, scope["method"], request)
        await send(
            {
                "type": "http.response.start",
                "status": response.status,
                "headers": [(b"content-type", response.content_type.encode())],
            }
        )
        await send({"type": "http.response.body", "body": response.body})

    return app


def wsgi_app(ingest: Any) -> Any:
    import http

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        headers = email.message.Message()
        for key, value in environ.items():
            if key.startswith("HTTP_"):
                headers[key[5:].replace("_", "-")] = value
        if environ.get("CONTENT_LENGTH"):
            headers["Content-Length"] = environ["CONTENT_LENGTH"]
        if environ.get("CONTENT_TYPE"):
            headers["Content-Type"] = environ["CONTENT_TYPE"]
        length = int(environ.get("CONTENT_LENGTH") or 0)
        request = AsgiRequest(environ["PATH_INFO"], headers, environ["wsgi.input"].read(length))
        response = route(ingest, environ["REQUEST_METHOD"], request)
        phrase = http.HTTPStatus(response.status).phrase
        start_response(f"{response.status} {phrase}", [("Content-Type", response.content_type)])
        return [response.body]

    return app


PEER_KIND = "ingest@peer"  # with --peer-tree
KINDS = ("ingest", "uvicorn+h11", "uvicorn+httptools", "uvicorn+h11+threads",
         "uvicorn+httptools+threads", "waitress")  # fmt: skip


def serve(kind: str, port: int) -> None:
    ingest = _ingest()
    if kind in ("ingest", "threading"):  # "threading": what a tree from before the switch calls it
        from warehouse.ingest.server import IngestHTTPServer

        IngestHTTPServer(("127.0.0.1", port), ingest).serve_forever()
    elif kind == "waitress":
        import waitress

        waitress.serve(wsgi_app(ingest), host="127.0.0.1", port=port, threads=8, _quiet=True)
    else:
        import uvicorn

        config = uvicorn.Config(
            asgi_app(ingest, kind.endswith("+threads")), host="127.0.0.1", port=port,
            http=kind.split("+")[1], lifespan="off", log_level="warning", access_log=False,
            loop="asyncio",
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


def one_round(
    kind: str, clients: int, batches: int, bodies: list[bytes], peer_tree: str | None = None
) -> tuple[float, float]:
    """(server CPU microseconds per batch, batches per second)."""
    port = free_port()
    server: Any
    if kind == PEER_KIND:
        # The product server of another checkout (`--peer-tree`: one from before the switch, for
        # a before/after in one run), its own interpreter reading that checkout's code first.
        server = subprocess.Popen(
            [sys.executable, "-c", f"from bench.http_servers import serve; serve('threading', {port})"],
            cwd=peer_tree, env={**os.environ, "PYTHONPATH": str(peer_tree)},
        )  # fmt: skip
    else:
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
    if kind == PEER_KIND:
        server.wait(30)
    else:
        server.join(30)
    total = clients * batches
    return cpu_s / total * 1e6, total / wall_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--batches", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--kinds", default=",".join(KINDS), help="comma-separated, of " + ", ".join(KINDS)
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--peer-tree",
        help=f"another checkout (e.g. `git archive main`): adds the kind {PEER_KIND}, its server",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.clients, args.batches, args.rounds = 4, 50, 1
    # The agent's codec (lz4): zstd's per-buffer contexts cost ~0.6 ms per batch to decode, the
    # same for every server, and no agent sends it.
    bodies = [to_ipc(gpu_batch(f"h{i}", start_ms=EPOCH_MS + i * 10_000), compression=WIRE_CODEC)
              for i in range(16)]  # fmt: skip
    kinds = args.kinds.split(",") + ([PEER_KIND] if args.peer_tree else [])
    results: dict[str, list[tuple[float, float]]] = {kind: [] for kind in kinds}
    loads = [os.getloadavg()[0]]
    for n in range(args.rounds):
        for kind in kinds[n % len(kinds) :] + kinds[: n % len(kinds)]:
            results[kind].append(
                one_round(kind, args.clients, args.batches, bodies, args.peer_tree)
            )
        loads.append(os.getloadavg()[0])
    print(f"{args.clients} clients x {args.batches} batches of {len(bodies[0])} bytes, "
          f"{args.rounds} rounds; 1-min load at each round's end "
          f"{', '.join(f'{x:.1f}' for x in loads)}")  # fmt: skip
    for kind, rounds in results.items():
        cpus = [r[0] for r in rounds]
        rates = [r[1] for r in rounds]
        print(f"  {kind:26s} server CPU {statistics.median(cpus):6.0f} us/batch "
              f"(min {min(cpus):.0f}, max {max(cpus):.0f}; rounds {', '.join(f'{c:.0f}' for c in cpus)})"
              f", {statistics.median(rates):4.0f} batches/s (min {min(rates):.0f}, max {max(rates):.0f})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
