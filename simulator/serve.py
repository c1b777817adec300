"""Live serving: one dcgm-exporter (and node_exporter) stand-in per simulated host, on 127.0.0.1, in one process.

What it is for: agents scrape these exactly as they would scrape dcgm-exporter on :9400.
`GET /metrics` answers the host's page for the current second of the injected clock with
dcgm-exporter's Content-Type, or 503 when the simulated scrape fails (missing samples). Every
answer can be recorded (`record_dir`: one append-only JSON Lines file per host, one line per
request: host, served_at, status, page) so an end-to-end test can prove that every served sample
reached the warehouse exactly once.

`GET /node/metrics` on the same port answers the host's node_exporter page (node_page.py: its
CPUs, memory, network and disk, following the jobs on its GPUs), always 200 and never recorded,
so that an agent's `agent.node_exporter_url` reads the simulated host, not the machine that runs
the simulator.

Each host is a ThreadingHTTPServer in its own daemon thread: 16 hosts cost 16 idle threads.
`stop()` shuts every server down and joins its thread.

Must never: listen on anything but the given address (127.0.0.1 by default), or compute values.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from simulator.fleet import Host
from simulator.render import CONTENT_TYPE
from simulator.sim import FleetSimulator

__all__ = ["NODE_PATH", "ExporterFleet"]

NODE_PATH = "/node/metrics"  # the host's node_exporter page, next to dcgm-exporter's /metrics

log = logging.getLogger(__name__)
Clock = Callable[[], float]


class _Recorder:
    """Appends one JSON line per answer to `<dir>/<host>.jsonl`, one lock per file."""

    def __init__(self, directory: Path, host: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{host}.jsonl"
        self._lock = threading.Lock()

    def write(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, separators=(",", ":")) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)


class _Answers:
    """The answers in flight, so that stopping waits for each one's record line.

    Why: a handler thread (a daemon) sent its page and was killed at exit before it wrote the
    record, so an agent stored a page the record never listed (an end-to-end test saw one extra
    sample per GPU). After `close`, a request on a kept-alive connection gets no answer at all,
    which a scraper counts as a failed scrape, as it would a stopped exporter."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._in_flight = 0
        self._closed = False

    def begin(self) -> bool:
        with self._changed:
            if self._closed:
                return False
            self._in_flight += 1
            return True

    def end(self) -> None:
        with self._changed:
            self._in_flight -= 1
            self._changed.notify_all()

    def close(self, timeout_s: float) -> None:
        with self._changed:
            self._closed = True
            self._changed.wait_for(lambda: self._in_flight == 0, timeout_s)


def _handler(
    sim: FleetSimulator,
    host: Host,
    clock: Clock,
    recorder: _Recorder | None,
    answers: _Answers,
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "dcgm-exporter-sim"
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            if not answers.begin():
                self.close_connection = True
                return
            try:
                self._get()
            finally:
                answers.end()

        def _get(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == NODE_PATH:
                self._answer(HTTPStatus.OK, sim.node_page(host, clock()), CONTENT_TYPE)
                return
            if path != "/metrics":
                self._answer(
                    HTTPStatus.NOT_FOUND, "404 page not found\n", "text/plain; charset=utf-8"
                )
                return
            now = clock()
            if sim.scrape_fails(host, now):
                status, body = HTTPStatus.SERVICE_UNAVAILABLE, ""
                self._answer(status, "DCGM is not available\n", "text/plain; charset=utf-8")
            else:
                status, body = HTTPStatus.OK, sim.page(host, now)
                self._answer(status, body, CONTENT_TYPE)
            if recorder is not None:
                recorder.write(
                    {"host": host.name, "served_at": now, "status": int(status), "page": body}
                )

        def _answer(self, status: HTTPStatus, body: str, content_type: str) -> None:
            data = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("%s %s", host.name, format % args)

    return Handler


class ExporterFleet:
    """HTTP servers for every host of `sim`; ports base_port + i, or free ports when 0."""

    def __init__(
        self,
        sim: FleetSimulator,
        clock: Clock,
        *,
        address: str = "127.0.0.1",
        base_port: int = 0,
        record_dir: Path | None = None,
    ) -> None:
        self.sim = sim
        self.address = address
        self._servers: list[tuple[Host, ThreadingHTTPServer]] = []
        self._threads: list[threading.Thread] = []
        self._answers = _Answers()
        try:
            for host in sim.hosts:
                port = base_port + host.index if base_port else 0
                recorder = _Recorder(record_dir, host.name) if record_dir else None
                server = ThreadingHTTPServer(
                    (address, port), _handler(sim, host, clock, recorder, self._answers)
                )
                server.daemon_threads = True
                self._servers.append((host, server))
        except OSError as exc:
            self._close()
            from fleetscope.errors import ConfigError

            raise ConfigError(f"cannot listen on {address}:{port}: {exc}") from exc

    def urls(self) -> dict[str, str]:
        """Host name -> its /metrics URL."""
        return {
            host.name: f"http://{self.address}:{server.server_address[1]}/metrics"
            for host, server in self._servers
        }

    def node_urls(self) -> dict[str, str]:
        """Host name -> its node_exporter page's URL."""
        return {
            host.name: f"http://{self.address}:{server.server_address[1]}{NODE_PATH}"
            for host, server in self._servers
        }

    def start(self) -> ExporterFleet:
        for host, server in self._servers:
            thread = threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": 0.1},
                name=f"sim-exporter-{host.name}",
                daemon=True,
            )
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        for _, server in self._servers:
            if self._threads:
                server.shutdown()
        self._answers.close(timeout_s=30.0)
        for thread in self._threads:
            thread.join()
        self._close()

    def _close(self) -> None:
        for _, server in self._servers:
            server.server_close()
        self._servers = []
        self._threads = []

    def __enter__(self) -> ExporterFleet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
