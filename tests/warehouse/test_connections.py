"""Slow and greedy clients against a real server: deadlines, the connection cap, backpressure.

Before issue 12, 300 half-sent requests held 300 server threads for over a minute. Each test here
holds sockets open the way such a client does and asserts the exact answer, while a well-behaved
client is still served.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator

import pytest

from fleetscope.contract import to_ipc
from fleetscope.settings import Settings
from simulator.maker.batches import gpu_batch
from simulator.wire import TEST_TOKEN, headers_for, post_batch
from warehouse.ingest.runtime import Server


@pytest.fixture
def strict(settings: Settings) -> Iterator[Server]:
    running = Server(
        settings.with_overrides(
            server__max_connections=8, server__header_timeout_s=1.0, server__body_timeout_s=1.0
        )
    )
    running.start()
    try:
        yield running
    finally:
        running.stop()


def connect(server: Server) -> socket.socket:
    host, port = server.http.server_address[:2]
    return socket.create_connection((str(host), int(port)), timeout=30)


def read_answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def wait_for(condition: Callable[[], bool], deadline_s: float = 20.0) -> None:
    end = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < end, "condition not met in time"
        time.sleep(0.02)


def test_a_client_that_never_finishes_its_headers_is_disconnected(strict: Server) -> None:
    with connect(strict) as sock:
        sock.sendall(b"POST /v1/batches/gpu_samples HTTP/1.1\r\nHost: x\r\n")  # then nothing
        started = time.monotonic()
        assert read_answer(sock) == b""  # closed by the header deadline, no answer owed
        assert 0.9 <= time.monotonic() - started < 10
    assert post_batch(strict.url, "gpu_samples", gpu_batch("ok"), token=TEST_TOKEN).status == 202


def test_an_idle_kept_alive_connection_is_closed_after_the_header_deadline(strict: Server) -> None:
    with connect(strict) as sock:
        wait_for(lambda: strict.http.guard.count == 1)
        assert read_answer(sock) == b""
    wait_for(lambda: strict.http.guard.count == 0)


def test_a_stalled_body_is_answered_408_and_the_connection_closed(strict: Server) -> None:
    body = to_ipc(gpu_batch("slow"))
    head = "".join(f"{k}: {v}\r\n" for k, v in headers_for("slow-1", TEST_TOKEN).items())
    with connect(strict) as sock:
        sock.sendall(
            f"POST /v1/batches/gpu_samples HTTP/1.1\r\nHost: x\r\n"
            f"Content-Length: {len(body)}\r\n{head}\r\n".encode()
            + body[:100]
        )
        answer = read_answer(sock)
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert b"\r\nconnection: close\r\n" in answer.lower()  # header names are case-insensitive
    assert b"body not received within 1 s (server.body_timeout_s): 100 of" in answer
    assert strict.writer.stats.batches_committed == 0


def test_past_the_connection_cap_a_client_gets_503_with_retry_after(strict: Server) -> None:
    held = [connect(strict) for _ in range(8)]
    wait_for(lambda: strict.http.guard.count == 8)
    with connect(strict) as extra:
        answer = read_answer(extra)
    assert answer.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
    assert b"Retry-After: 1\r\n" in answer
    assert answer.endswith(b'{"error": "too many connections (server.max_connections); retry"}')
    for sock in held:
        sock.close()
    wait_for(lambda: strict.http.guard.count == 0)
    assert post_batch(strict.url, "gpu_samples", gpu_batch("after"), token=TEST_TOKEN).status == 202
    assert strict.http.guard.refused._value.get() == 1
