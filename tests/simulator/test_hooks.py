"""Job metadata reaches ingest like a scheduler prolog/epilog would post it, and survives ingest
being down."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from simulator.hooks import JobHook
from simulator.sim import FleetSimulator

from .conftest import T0


class Ingest:
    """A real HTTP server that records POST /v1/jobs bodies."""

    def __init__(self, port: int = 0) -> None:
        self.bodies: list[list[dict[str, Any]]] = []
        self.auth: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                outer.bodies.append(json.loads(self.rfile.read(length)))
                outer.auth.append(self.headers["Authorization"])
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_starts_and_ends_are_posted_and_retried_after_an_outage(sim: FleetSimulator) -> None:
    now = [float(T0 + 3600)]
    port = free_port()
    hook = JobHook(sim, lambda: now[0], f"http://127.0.0.1:{port}", "tok")
    hook.tick()  # ingest is down: records stay queued
    assert hook.posted == 0
    ingest = Ingest(port)
    try:
        hook.tick()
        running = {r["job_id"] for r in ingest.bodies[0]}
        expected = {j.job_id for j in sim.fleet.jobs if j.start_s <= now[0] < j.end_s}
        assert running == expected
        assert all(r["end_ts"] is None for r in ingest.bodies[0])
        assert ingest.auth == ["Bearer tok"]
        now[0] += 4 * 3600
        hook.tick()
        ended = {r["job_id"]: r for batch in ingest.bodies[1:] for r in batch if r["end_ts"]}
        finished = {j.job_id for j in sim.fleet.jobs if T0 + 3600 < j.end_s <= now[0]}
        assert set(ended) == finished
        some = sim.fleet.jobs[0]
        record = next(iter(ended.values()))
        assert set(record) == {
            "job_id", "cluster", "user", "team", "name", "model", "scheduler",
            "start_ts", "end_ts", "gpus",
        }  # fmt: skip
        assert some.cluster == record["cluster"]
        hook.tick()  # nothing new: nothing posted
        assert len(ingest.bodies) == 2
    finally:
        ingest.close()
