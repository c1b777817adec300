"""One request as the ingest routes see it: its path, its headers, and its body read on demand.

Why: the routes (warehouse.ingest.server ROUTES, warehouse.profiling.api, analyzers.read_api) are
plain blocking functions `fn(handler, ingest, *groups)` that check the token and the envelope
BEFORE they read a body, and name their own body limit. The server runs them on a thread
(uvicorn's event loop must not block on Ticket.wait); `Handler.read_body` then reserves the
declared length against server.max_inflight_bytes and only then asks the loop for the bytes
(warehouse.ingest.protocol pauses reading after a read that left a body incomplete, so past
that read the body stays in the socket until the application asks). A body that came whole with
its head is already in memory: the server hands it over as `arrived`, saving the route thread a
round trip to the loop (the common case: an agent's batch of ~25 KB), and it is still reserved,
and refused 413 or 503, exactly as one read from the socket. So 411, 413 and the 503 of
the in-flight budget are answered without reading the body, as before the switch.

Header values are bytes on the wire; they are decoded as Latin-1, as http.server did, so a
superscript digit (0xB2) reaches warehouse.ingest.framing as '²' and is refused there as 400.

Must never: read a body before its length is reserved, or wait on the loop from the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from fleetscope.errors import IngestError, PayloadTooLargeError
from warehouse.ingest.framing import body_length
from warehouse.ingest.inflight import InFlightBytes

Receive = Callable[[], Awaitable[dict[str, Any]]]
LOOP_GRACE_S = 5.0
"""How much longer than server.body_timeout_s a route thread waits for the loop's answer."""


class RequestHeaders:
    """Request headers with case-insensitive names and repeated fields kept (what the routes and
    warehouse.ingest.framing read: `get` and `get_all`, as email.message.Message offers)."""

    def __init__(self, fields: Iterable[tuple[bytes, bytes]]) -> None:
        self._fields: dict[str, list[str]] = {}
        for name, value in fields:
            self._fields.setdefault(name.decode("latin-1").lower(), []).append(
                value.decode("latin-1")
            )

    def get(self, name: str, default: str | None = None) -> str | None:
        values = self._fields.get(name.lower())
        return values[0] if values else default

    def get_all(self, name: str, /) -> list[str] | None:
        return self._fields.get(name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._fields


class Handler:
    """The request a route answers; created on the event loop, used on the route's thread."""

    def __init__(
        self,
        *,
        method: str,
        path: str,
        headers: RequestHeaders,
        receive: Receive,
        loop: asyncio.AbstractEventLoop,
        inflight: InFlightBytes,
        body_timeout_s: float,
        on_body_timeout: Callable[[], None],
        arrived: bytes | None = None,
    ) -> None:
        self.method = method
        self.path = path  # the request target as sent: raw path, then '?' and the query
        self.headers = headers
        self.body_read = False
        self.reserved_bytes = 0
        self._receive = receive
        self._loop = loop
        self._inflight = inflight
        self._body_timeout_s = body_timeout_s
        self._on_body_timeout = on_body_timeout
        self._arrived = arrived  # the whole body, when it came with the head (no loop round trip)

    def read_body(self, limit: int) -> bytes:
        """The body, at most `limit` bytes (413 beyond, unread); blocks the calling route thread."""
        length = body_length(self.headers)
        if length is None:
            raise IngestError("Content-Length is required", status=411)
        if length > limit:
            raise PayloadTooLargeError(f"body of {length} bytes is over the limit of {limit} bytes")
        if not self._inflight.reserve(length):
            raise IngestError(
                f"bodies in flight would pass server.max_inflight_bytes "
                f"({self._inflight.limit_bytes} bytes); retry",
                status=503,
            )
        self.reserved_bytes = length
        if self._arrived is not None:
            chunks, timed_out = [self._arrived], False
        else:
            future = asyncio.run_coroutine_threadsafe(self._receive_body(length), self._loop)
            try:  # the loop's own deadline answers first; this one frees the thread if the loop
                # stopped before running the read (a pool thread blocked forever blocks exit)
                chunks, timed_out = future.result(self._body_timeout_s + LOOP_GRACE_S)
            except concurrent.futures.TimeoutError:
                future.cancel()
                chunks, timed_out = [], True
        received = sum(len(chunk) for chunk in chunks)
        if timed_out:
            self._on_body_timeout()
            raise IngestError(
                f"body not received within {self._body_timeout_s:g} s (server.body_timeout_s): "
                f"{received} of {length} bytes",
                status=408,
            )
        self.body_read = True
        if received != length:
            raise IngestError(f"body ended after {received} of {length} bytes")
        return b"".join(chunks)

    async def _receive_body(self, length: int) -> tuple[list[bytes], bool]:
        """(the body's chunks, whether the deadline passed first); on the event loop."""
        chunks: list[bytes] = []
        received = 0
        try:
            async with asyncio.timeout(self._body_timeout_s):
                while received < length:
                    message = await self._receive()
                    if message["type"] != "http.request":  # http.disconnect: the client left
                        break
                    chunk = message.get("body", b"")
                    chunks.append(chunk)
                    received += len(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            return chunks, True
        return chunks, False
