"""No data shape stalls other agents (issue 27): a batch over a per-request shape limit is refused
413 naming the limit, before the writer sees it, while other agents keep being acknowledged.

The three shapes are the ones that held the single writer in issue 27: 10,000 rows on 10,000
distinct UTC days (60 s of 503 for everyone), 100,000 distinct hosts (20 s), and 5,000 one-row
record batches in one stream (25 s). Each is posted to a real server on loopback while an
innocent agent ships a small batch after each 202; the test waits for the innocent agent's acks
(condition-based, generous bounds for a busy 2-core machine), never for a fixed time.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pyarrow as pa
import pytest

from fleetscope.contract import to_ipc
from fleetscope.settings import Settings
from simulator.maker.batches import EPOCH_MS, gpu_batch
from simulator.wire import TEST_TOKEN as TOKEN
from simulator.wire import Answer, headers_for, post
from tests.readable import eventually
from warehouse.ingest.runtime import Server
from warehouse.read import reader

DAY_MS = 86_400_000
ACK_BOUND_S = 20.0  # one innocent ack may take this long on a busy 2-core box; before: > 60 s


def send(url: str, body: bytes, batch_id: str, agent: str, table: str = "gpu_samples") -> Answer:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    try:
        return post(conn, f"/v1/batches/{table}", body, headers_for(batch_id, TOKEN, agent))
    finally:
        conn.close()


@dataclass
class InnocentAgent:
    """Ships one small batch after each ack, recording (sent at, answered at, status)."""

    url: str
    acks: list[tuple[float, float, int]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        seq = 0
        while not self.stop.is_set():
            sent = time.monotonic()
            batch = gpu_batch("innocent", start_ms=EPOCH_MS + seq * 1000, timestamps=1, gpus=2)
            answer = send(self.url, to_ipc(batch), f"innocent-{seq}", "innocent")
            self.acks.append((sent, time.monotonic(), answer.status))
            seq += 1

    def acked_after(self, moment: float) -> int:
        return sum(1 for sent, _, status in list(self.acks) if sent >= moment and status == 202)


@contextmanager
def innocent_agent(url: str) -> Iterator[InnocentAgent]:
    agent = InnocentAgent(url)
    thread = threading.Thread(target=agent.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: agent.acked_after(0.0) >= 1, "the innocent agent's first ack")
        yield agent
    finally:
        agent.stop.set()
        thread.join(timeout=120)
    assert not thread.is_alive()
    assert {status for _, _, status in agent.acks} == {202}
    slowest = max(answered - sent for sent, answered, _ in agent.acks)
    assert slowest < ACK_BOUND_S, f"an innocent batch waited {slowest:.1f} s for its ack"


def wait_for(check: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def one_row_per_day(days: int) -> pa.Table:
    batch = gpu_batch("many-days", timestamps=days, gpus=1)
    ts_type = batch.schema.field("ts").type
    ts = pa.array([EPOCH_MS + d * DAY_MS for d in range(days)], pa.timestamp("ms", "UTC"))
    return batch.set_column(batch.schema.get_field_index("ts"), "ts", ts.cast(ts_type))


def one_row_per_host(hosts: int) -> pa.Table:
    batch = gpu_batch("many-hosts", timestamps=hosts, gpus=1)
    names = pa.array([f"host-{i:06d}" for i in range(hosts)])
    return batch.set_column(batch.schema.get_field_index("host"), "host", names)


def one_row_record_batches(count: int) -> pa.Table:
    batch = gpu_batch("many-batches", timestamps=count, gpus=1)
    return pa.Table.from_batches(batch.to_batches(max_chunksize=1))


def uncompressed(table: pa.Table) -> bytes:
    """Arrow's per-buffer codec costs a frame per buffer: 5,000 one-row batches take 26 s to
    compress here; the shape under test is the record-batch count, not the codec."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


HOSTILE: dict[str, tuple[Callable[[], bytes], str, str]] = {
    "days": (
        lambda: to_ipc(one_row_per_day(10_000)),
        "10000 distinct UTC days",
        "max_days_per_batch",
    ),
    "hosts": (
        lambda: to_ipc(one_row_per_host(100_000)),
        "100000 distinct hosts",
        "max_hosts_per_batch",
    ),
    "record batches": (
        lambda: uncompressed(one_row_record_batches(5_000)),
        "5000 Arrow record batches",
        "max_record_batches_per_batch",
    ),
}


@pytest.mark.parametrize("shape", sorted(HOSTILE))
def test_a_batch_over_a_shape_limit_is_refused_naming_it_while_others_are_acknowledged(
    server: Server, shape: str
) -> None:
    make, holds, setting = HOSTILE[shape]
    body = make()
    with innocent_agent(server.url) as agent:
        started = time.monotonic()
        answer = send(server.url, body, f"hostile-{shape.replace(' ', '-')}", "hostile")
        assert answer.status == 413
        error = str(answer.body["error"])
        assert holds in error and f"warehouse.{setting}" in error and "do not retry" in error
        wait_for(lambda: agent.acked_after(started) >= 3, "innocent acks after the hostile batch")
    query = "SELECT count(*), count(*) FILTER (WHERE host = 'innocent') FROM gpu_samples"
    acked = 2 * len(agent.acks)
    stored = eventually(
        lambda: reader.connect(server.settings).execute(query).fetchall(), [(acked, acked)]
    )
    assert stored == [(acked, acked)]  # nothing of the refused batch was stored


@pytest.fixture
def raised_limits(settings: Settings) -> Settings:
    return settings.with_overrides(
        warehouse__max_days_per_batch=100,
        warehouse__max_record_batches_per_batch=2_000,
    )


def test_batches_within_raised_limits_are_stored_while_others_are_acknowledged(
    raised_limits: Settings,
) -> None:
    running = Server(raised_limits)
    running.start()
    try:
        with innocent_agent(running.url) as agent:
            started = time.monotonic()
            days = send(running.url, to_ipc(one_row_per_day(100)), "a-quarter", "spool-replay")
            chatty = uncompressed(one_row_record_batches(2_000))
            batches = send(running.url, chatty, "chunks", "chatty")
            assert (days.status, days.body["rows"]) == (202, 100)
            assert (batches.status, batches.body["rows"]) == (202, 2_000)
            wait_for(lambda: agent.acked_after(started) >= 3, "innocent acks after the big ones")

        def stored() -> list[tuple[int, int]]:
            return (
                reader.connect(raised_limits)
                .execute(
                    "SELECT count(DISTINCT ts::DATE) FILTER (WHERE host = 'many-days'), "
                    "count(*) FILTER (WHERE host = 'many-batches') FROM gpu_samples"
                )
                .fetchall()
            )

        assert eventually(stored, [(100, 2_000)]) == [(100, 2_000)]
    finally:
        running.stop()
