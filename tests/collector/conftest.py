"""Fixtures for the collector's tests: the shared dcgm pages, a real exporter and a real ingest
peer on 127.0.0.1 (free ports).

The ingest peer is a small, real server speaking fleetscope.contract's wire format: real HTTP,
real Arrow IPC decoding and contract checks (conform), real batch-id de-duplication. Tests stop and
restart it on the same port to play an ingest outage.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow as pa
import pytest

from fleetscope.contract import HEADER_BATCH_ID, TABLES, conform, from_ipc
from fleetscope.errors import ContractError

DCGM_DIR = Path(__file__).resolve().parents[1] / "data" / "dcgm"
VARIANTS = ("a100_mig", "h100_k8s_release", "h100_slurm_main", "v100_legacy")


def dcgm_text(variant: str) -> str:
    return (DCGM_DIR / f"{variant}.prom").read_text()


class Exporter:
    """A real HTTP server answering GET with `self.text` (a dcgm-exporter stand-in page)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.status = 200
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = exporter.text.encode()
                self.send_response(exporter.status)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/metrics"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@dataclass
class Stored:
    table: str
    batch_id: str
    rows: pa.Table


@dataclass
class IngestState:
    token: str = "t0ken"
    batches: list[Stored] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    posts: int = 0
    status_override: int | None = None  # answer this status to every POST (e.g. 503)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _ReusableServer(ThreadingHTTPServer):
    allow_reuse_address = True
    daemon_threads = True


def _handler(state: IngestState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, payload: dict[str, object]) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._answer(200, {"ok": True})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            with state.lock:
                state.posts += 1
                if state.status_override is not None:
                    self._answer(state.status_override, {"error": "overridden"})
                    return
                if self.headers.get("Authorization") != f"Bearer {state.token}":
                    self._answer(401, {"error": "missing or invalid bearer token"})
                    return
                table = self.path.rsplit("/", 1)[-1]
                batch_id = self.headers.get(HEADER_BATCH_ID, "")
                if table not in TABLES or not batch_id:
                    self._answer(400, {"error": "unknown table or no batch id"})
                    return
                try:
                    rows = conform(table, from_ipc(body))
                except ContractError as exc:
                    self._answer(400, {"error": str(exc)})
                    return
                duplicate = batch_id in state.seen
                if not duplicate:
                    state.seen.add(batch_id)
                    state.batches.append(Stored(table, batch_id, rows))
                self._answer(
                    202, {"batch_id": batch_id, "rows": rows.num_rows, "duplicate": duplicate}
                )

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


class IngestPeer:
    def __init__(self, state: IngestState | None = None, port: int = 0) -> None:
        self.state = state or IngestState()
        self.port = port
        self._server: _ReusableServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> IngestPeer:
        self._server = _ReusableServer(("127.0.0.1", self.port), _handler(self.state))
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            assert self._thread is not None
            self._thread.join()
            self._server = None

    def rows(self, table: str) -> pa.Table:
        with self.state.lock:
            parts = [b.rows for b in self.state.batches if b.table == table]
        return pa.concat_tables(parts) if parts else TABLES[table].empty_table()


@pytest.fixture
def exporter() -> Iterator[Exporter]:
    server = Exporter(dcgm_text("h100_slurm_main"))
    yield server
    server.close()


@pytest.fixture
def ingest() -> Iterator[IngestPeer]:
    peer = IngestPeer().start()
    yield peer
    peer.stop()


@pytest.fixture
def page() -> Callable[[str], str]:
    """The text of a shared dcgm-exporter page by variant name."""
    return dcgm_text


@pytest.fixture
def make_exporter() -> Iterator[Callable[[str], Exporter]]:
    made: list[Exporter] = []

    def make(text: str) -> Exporter:
        made.append(Exporter(text))
        return made[-1]

    yield make
    for server in made:
        server.close()
