"""Agents waiting for their commit at once are all in progress at once, none queued behind a pool.

Why: a batch is answered 202 only once the writer committed it (Ticket.wait, up to the group
window), so on uvicorn the routes run on threads (warehouse.ingest.server). A thread pool smaller
than the agents waiting would hold the rest back before they are even decoded, and their acks
would queue a full commit round behind. The writer here holds every ticket until the test opens
the gate: all 64 requests must reach it while none has been answered, with the default pool of
`asyncio.to_thread` (min(32, CPUs + 4) threads) that could never happen.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest

from bench.http_servers import TOKEN, _ingest
from fleetscope.contract import to_ipc
from simulator.maker.batches import gpu_batch
from simulator.wire import headers_for
from warehouse.ingest.batch_queue import Ticket
from warehouse.ingest.server import IngestHTTPServer
from warehouse.storage.writer import WriterStats

AGENTS = 64


class GatedSink:
    """A writer that commits nothing until `gate` is set, then everything at once."""

    queued_rows = 0
    log_fsyncs = 0

    def __init__(self) -> None:
        self.stats = WriterStats()
        self.gate = threading.Event()
        self.waiting = 0
        self._lock = threading.Lock()

    def submit(
        self, table: str, data: pa.Table, batch_id: str, agent: str = "", agent_version: str = ""
    ) -> tuple[Ticket, bool]:
        ticket = Ticket(batch_id, table, data.num_rows, agent, data, datetime.now(UTC))
        with self._lock:
            self.waiting += 1
        threading.Thread(target=lambda: (self.gate.wait(), ticket._resolve()), daemon=True).start()
        return ticket, False


def wait_for(condition: Callable[[], bool], deadline_s: float = 60.0) -> None:
    end = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < end, "condition not met in time"
        time.sleep(0.02)


@pytest.fixture
def gated() -> Iterator[tuple[IngestHTTPServer, GatedSink]]:
    ingest: Any = _ingest()
    sink = GatedSink()
    ingest.writer = sink
    server = IngestHTTPServer(("127.0.0.1", 0), ingest)
    server.start()
    try:
        yield server, sink
    finally:
        sink.gate.set()
        server.stop()


def test_every_agent_waiting_for_its_commit_is_in_progress_at_once(
    gated: tuple[IngestHTTPServer, GatedSink],
) -> None:
    server, sink = gated
    port = server.server_address[1]
    statuses: list[int] = []

    def agent(n: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        body = to_ipc(gpu_batch(f"wait-{n}"))
        conn.request("POST", "/v1/batches/gpu_samples", body, headers_for(f"wait-{n}", TOKEN))
        statuses.append(conn.getresponse().status)
        conn.close()

    agents = [threading.Thread(target=agent, args=(n,)) for n in range(AGENTS)]
    for thread in agents:
        thread.start()
    wait_for(lambda: sink.waiting == AGENTS)  # all submitted, none answered: the gate is shut
    assert statuses == []
    sink.gate.set()
    for thread in agents:
        thread.join()
    assert statuses == [202] * AGENTS
