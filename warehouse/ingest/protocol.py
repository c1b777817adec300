"""uvicorn's httptools protocol with the ingest server's guarantees on the connection itself.

Why a subclass (the rest of uvicorn is used through its public Config/Server): four guarantees
live below the ASGI application, where uvicorn offers no setting for them.
- The connection cap answers a canned 503 with Retry-After the moment a connection is made
  (`limit_concurrency` only answers once a request's headers have arrived, so idle or
  slowloris connections would still hold their sockets).
- A request line and headers must arrive within server.header_timeout_s of the server starting
  to wait for them (`timeout_keep_alive` restarts on every byte received, so a slowloris sending
  a byte a second would never be cut off; it stays only as a backstop).
- llhttp refuses the framing RFC 9112 forbids (two Content-Lengths, Content-Length with
  Transfer-Encoding, a non-ASCII digit) before any header reaches the application, and uvicorn
  answers "Invalid HTTP request received."; we answer 400 and close with what
  warehouse.ingest.framing says about the same bytes, so the client learns which header is wrong.
  The request head is also capped (64 KiB, 100 fields, as http.server did: 431), since httptools
  buffers a header of any length until it ends.
- Reading pauses after a read that left a request's body incomplete, so the rest of the body stays
  in the socket until the route has reserved its length against server.max_inflight_bytes and
  asks for it (warehouse.ingest.handler); at most the one read that carried the head (256 KiB,
  asyncio's read size) is in memory before that.

Must never: answer a client's bytes with a 5xx, or write an error into a response in progress.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from typing import Any, ClassVar

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from fleetscope.errors import IngestError
from warehouse.ingest.connections import OVERLOADED, ConnectionGuard
from warehouse.ingest.framing import body_length
from warehouse.ingest.handler import RequestHeaders
from warehouse.ingest.metrics import ServerMetrics

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 65536
"""A request line and headers longer than this are refused 431 (http.server's line limit)."""
MAX_HEADER_FIELDS = 100
"""More header fields than this are refused 431 (http.server's limit)."""
BODY_ARRIVED = "fleetscope.body_arrived"
"""Set in a request's ASGI scope when its whole body came with its head (in memory already): the
server then takes it on the event loop, and the route thread need not ask the loop for it."""


class HeadTooLargeError(Exception):
    pass


class IngestProtocol(HttpToolsProtocol):
    """Bound to one server's guard and metrics by `bound` (uvicorn builds the protocol itself)."""

    guard: ClassVar[ConnectionGuard]
    metrics: ClassVar[ServerMetrics]

    @classmethod
    def bound(cls, guard: ConnectionGuard, metrics: ServerMetrics) -> type[IngestProtocol]:
        return type("BoundIngestProtocol", (cls,), {"guard": guard, "metrics": metrics})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._admitted = False
        self._header_timer: asyncio.TimerHandle | None = None
        self._in_head = True  # between requests or inside a request's head
        self._head = bytearray()  # the head's first bytes, to name a framing error
        self._head_bytes = 0  # received since the head began (ended or not)
        self._parsed_head_bytes = 0  # of the request line and header fields parsed
        self._header_fields = 0

    # -- the connection cap and the header deadline --------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not self.guard.admit():
            assert isinstance(transport, asyncio.Transport)
            transport.write(OVERLOADED)  # under TLS too: asyncio finished the handshake first
            transport.close()
            return
        self._admitted = True
        # asyncio turns Nagle off only for sockets made with proto IPPROTO_TCP, which
        # socket.create_server's (proto 0) are not: with Nagle on, the answer's second write
        # (uvicorn writes head and body apart) waited ~40 ms for the client's delayed ACK.
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)  # type: ignore[arg-type]
        self._await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._admitted:
            return
        self._admitted = False
        self.guard.release()
        self._cancel_header_timer()
        super().connection_lost(exc)

    def _await_headers(self) -> None:
        self._cancel_header_timer()
        self._header_timer = self.loop.call_later(self.guard.header_timeout_s, self._headers_late)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        self.guard.timeouts.labels("headers").inc()
        self.transport.close()  # no answer owed: the client never finished asking

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.cycle.response_complete:  # none pipelined
            self._await_headers()

    # -- the head: its size, its framing errors, and the body left unread ------------------------
    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head += data[: max(0, MAX_HEAD_BYTES - len(self._head))]
            self._head_bytes += len(data)
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
            if self._in_head and self._head_bytes > MAX_HEAD_BYTES:
                raise HeadTooLargeError(f"request line and headers over {MAX_HEAD_BYTES} bytes")
            if not self._in_head and self.cycle.more_body:
                # A body still on its way stays in the socket until its route has reserved it
                # and asks (receive resumes reading, chunk by chunk).
                self.flow.pause_reading()
        except HeadTooLargeError as exc:
            self._refuse(431, str(exc))
        except httptools.HttpParserUpgrade:
            pass  # no upgrades here: the request is answered as a plain one
        except httptools.HttpParserError as exc:
            if isinstance(exc.__context__, HeadTooLargeError):
                self._refuse(431, str(exc.__context__))
            else:
                self._refuse(400, self._framing_error(exc))

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._header_fields = 0
        self._parsed_head_bytes = 0

    def on_url(self, url: bytes) -> None:
        self._count_head(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_fields += 1
        if self._header_fields > MAX_HEADER_FIELDS:
            raise HeadTooLargeError(f"more than {MAX_HEADER_FIELDS} header fields")
        self._count_head(len(name) + len(value) + 4)
        super().on_header(name, value)

    def _count_head(self, n: int) -> None:
        """A head that ended within one read is measured here (data_received sees it unended)."""
        self._parsed_head_bytes += n
        if self._parsed_head_bytes > MAX_HEAD_BYTES:
            raise HeadTooLargeError(f"request line and headers over {MAX_HEAD_BYTES} bytes")

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head.clear()
        self._cancel_header_timer()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        if self.cycle is not None and not self.cycle.response_complete:
            self.scope[BODY_ARRIVED] = True  # type: ignore[literal-required]
        super().on_message_complete()
        self._in_head = True
        self._head_bytes = 0

    def _framing_error(self, exc: Exception) -> str:
        """What warehouse.ingest.framing says of the head llhttp refused, else llhttp's reason."""
        head = bytes(self._head).split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]
        fields = [(name.strip(), value.strip()) for name, _, value in
                  (line.partition(b":") for line in head) if _]  # fmt: skip
        try:
            body_length(RequestHeaders(fields))
        except IngestError as framing:
            return str(framing)
        return f"malformed HTTP request: {exc}"

    def _refuse(self, status: int, message: str) -> None:
        """Answer `status` with `message` and close; only between responses (else just close)."""
        self._cancel_header_timer()
        self.metrics.requests.labels("unknown", str(status)).inc()
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.keep_alive = False  # a response is in progress: close after it
            self.flow.pause_reading()
            return
        body = json.dumps({"error": message}).encode()
        reason = {400: "Bad Request", 431: "Request Header Fields Too Large"}[status]
        self.transport.write(
            b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (status, reason.encode(), len(body), body)
        )
        self.transport.close()
