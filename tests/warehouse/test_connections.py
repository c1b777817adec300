"""Slow and greedy clients against a real server: deadlines, the connection cap, backpressure.

Before issue 12, 300 half-sent requests held 300 server threads for over a minute. Each test here
holds sockets open the way such a client does and asserts the exact answer, while a well-behaved
client is still served. Since the switch to uvicorn (issue 28) these hold on its event loop:
uvicorn's own keep-alive timeout restarts on every byte, so a trickling client is cut off only by
our header deadline (warehouse.ingest.protocol).
"""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fleetscope.contract import to_ipc
from fleetscope.settings import Settings
from simulator.maker.batches import gpu_batch
from simulator.wire import TEST_TOKEN, headers_for, post_batch
from warehouse.ingest.runtime import Server

TLS = Path(__file__).resolve().parents[1] / "data" / "tls"  # self-signed for 127.0.0.1


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


def test_a_client_trickling_its_headers_is_cut_off_at_the_header_deadline(strict: Server) -> None:
    head = b"POST /v1/batches/gpu_samples HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: " + b"a" * 10_000
    with connect(strict) as sock:
        sock.settimeout(0.2)
        sent = 0
        closed = False
        end = time.monotonic() + 30
        while not closed and time.monotonic() < end:  # a byte every 0.2 s: never idle for 1 s
            try:
                sock.sendall(head[sent : sent + 1])
                sent += 1
                closed = sock.recv(1) == b""
            except TimeoutError:
                continue
            except OSError:  # reset: the server closed while we were sending
                closed = True
        assert closed, f"still open after {sent} bytes"
    assert post_batch(strict.url, "gpu_samples", gpu_batch("ok"), token=TEST_TOKEN).status == 202


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (b"X-Pad: " + b"a" * 70_000 + b"\r\n", b"request line and headers over 65536 bytes"),
        (b"".join(b"X-F%d: 1\r\n" % n for n in range(101)), b"more than 100 header fields"),
    ],
    ids=["a 70 KB header", "101 header fields"],
)
def test_an_oversized_request_head_is_431_and_closed(
    strict: Server, extra: bytes, message: bytes
) -> None:
    with connect(strict) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + extra + b"\r\n")
        answer = read_answer(sock)
    assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"), answer[:200]
    assert message in answer
    wait_for(lambda: strict.http.guard.count == 0)


def test_a_tls_client_that_never_says_hello_blocks_no_one(settings: Settings) -> None:
    server = Server(
        settings.with_overrides(
            server__tls_cert_file=str(TLS / "ingest-cert.pem"),
            server__tls_key_file=str(TLS / "ingest-key.pem"),
        )
    )
    server.start()
    try:
        host, port = server.http.server_address[:2]
        silent = [socket.create_connection((str(host), int(port)), timeout=30) for _ in range(4)]
        context = ssl.create_default_context(cafile=str(TLS / "ingest-cert.pem"))
        with (
            socket.create_connection((str(host), int(port)), timeout=30) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert read_answer(tls).startswith(b"HTTP/1.1 200 OK\r\n")
        for sock in silent:
            sock.close()
    finally:
        server.stop()
