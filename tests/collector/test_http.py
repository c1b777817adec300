"""The agent's HTTP client over plain http: every way a server may frame an answer (Content-Length,
chunked, up to EOF, HTTP/1.0, interim 1xx, 204), kept-alive reuse, and a transparent retry when
the server dropped an idle kept-alive connection. The server is a real socket on 127.0.0.1 that
answers with scripted bytes, so each framing is exactly what is on the wire.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from collector.http import KeepAliveTransport
from fleetscope.errors import SourceUnavailableError


class Scripted:
    """Answers the i-th request with answers[i]; `close_after` closes the connection after it."""

    def __init__(self, answers: list[bytes], close_after: set[int] | None = None) -> None:
        self.answers = answers
        self.close_after = close_after or set()
        self.requests: list[bytes] = []
        self.connections = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                reader = conn.makefile("rb")
                while len(self.requests) < len(self.answers):
                    head = b""
                    while not head.endswith(b"\r\n\r\n"):
                        line = reader.readline()
                        if not line:
                            break
                        head += line
                    if not head:
                        break
                    length = 0
                    for line in head.split(b"\r\n"):
                        if line.lower().startswith(b"content-length:"):
                            length = int(line.split(b":")[1])
                    self.requests.append(head + reader.read(length))
                    index = len(self.requests) - 1
                    conn.sendall(self.answers[index])
                    if index in self.close_after:
                        break
                reader.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def transport() -> Iterator[KeepAliveTransport]:
    client = KeepAliveTransport()
    yield client
    client.close()


def test_content_length_chunked_and_eof_framed_bodies(transport: KeepAliveTransport) -> None:
    server = Scripted(
        [
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"4;ext=1\r\nwiki\r\n6\r\npedia \r\nE\r\nin \r\n\r\nchunks.\r\n0\r\nX-T: 1\r\n\r\n",
            b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\n\r\nno such page",
        ],
        close_after={2},
    )
    try:
        first = transport.request("GET", server.url + "/metrics?x=1")
        second = transport.request("GET", server.url + "/metrics")
        third = transport.request("GET", server.url + "/missing")
    finally:
        server.close()
    assert (first.status, first.body) == (200, b"hello")
    assert (second.status, second.body) == (200, b"wikipedia in \r\n\r\nchunks.")
    assert (third.status, third.body) == (404, b"no such page")
    assert server.connections == 1  # kept alive across all three
    assert server.requests[0].startswith(b"GET /metrics?x=1 HTTP/1.1\r\nHost: 127.0.0.1:")


def test_post_sends_its_body_and_headers(transport: KeepAliveTransport) -> None:
    server = Scripted([b"HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\n{}"])
    try:
        answer = transport.request(
            "POST", server.url + "/v1/batches/gpu_samples", body=b"\x00\x01", headers={"X-A": "b"}
        )
    finally:
        server.close()
    assert (answer.status, answer.body) == (202, b"{}")
    request = server.requests[0]
    assert request.startswith(b"POST /v1/batches/gpu_samples HTTP/1.1\r\n")
    assert b"\r\nX-A: b\r\n" in request and b"\r\nContent-Length: 2\r\n" in request
    assert request.endswith(b"\r\n\r\n\x00\x01")


def test_interim_1xx_and_204_and_http10_close(transport: KeepAliveTransport) -> None:
    server = Scripted(
        [
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
            b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nnew",
        ],
        close_after={1},
    )
    try:
        empty = transport.request("GET", server.url + "/a")
        old = transport.request("GET", server.url + "/b")
        fresh = transport.request("GET", server.url + "/c")  # HTTP/1.0 closed: a new connection
    finally:
        server.close()
    assert [(a.status, a.body) for a in (empty, old, fresh)] == [
        (204, b""), (200, b"ok"), (200, b"new"),
    ]  # fmt: skip
    assert server.connections == 2


def test_a_dropped_idle_connection_is_retried_once_on_a_fresh_one(
    transport: KeepAliveTransport,
) -> None:
    server = Scripted(
        [
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na",  # then the server drops it
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb",
        ],
        close_after={0},
    )
    try:
        assert transport.request("GET", server.url + "/").body == b"a"
        assert transport.request("GET", server.url + "/").body == b"b"
    finally:
        server.close()
    assert server.connections == 2


@pytest.mark.parametrize(
    "answer",
    [
        b"SPDY/3 200 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
    ],
)
def test_a_malformed_answer_is_source_unavailable(
    transport: KeepAliveTransport, answer: bytes
) -> None:
    server = Scripted([answer, answer], close_after={0, 1})
    try:
        with pytest.raises(SourceUnavailableError, match=r"^GET http://127\.0\.0\.1:\d+/: "):
            transport.request("GET", server.url + "/")
    finally:
        server.close()


def test_refused_connection_and_bad_urls_are_source_unavailable(
    transport: KeepAliveTransport,
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    for url in (f"http://127.0.0.1:{port}/", "http://127.0.0.1:notaport/", "ftp://x/"):
        with pytest.raises(SourceUnavailableError):
            transport.request("GET", url, timeout_s=2)
