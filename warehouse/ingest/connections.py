"""Bounds on the ingest server's connections: how many, and how long a client may dawdle.

Why: the server gives each connection a thread (http.server), and before issue 12 nothing bounded
either: 300 half-sent requests held 300 threads for over a minute. `ConnectionGuard` admits at
most `max_connections` at once (the server answers the next one 503 with Retry-After and closes
it), and a sweeper thread shuts down the socket of any connection that has not finished sending
its request line and headers within `header_timeout_s` of starting to wait for them (an idle
kept-alive connection included), which wakes its blocked thread. Body reads have their own
deadline in the handler (warehouse.ingest.server), answered 408.

Must never: block the accept loop (admit is a dict operation under a lock), or close a
connection whose request is being handled.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

from prometheus_client import CollectorRegistry, Counter, Gauge

_OVERLOADED_BODY = b'{"error": "too many connections (server.max_connections); retry"}'
OVERLOADED = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
    b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(_OVERLOADED_BODY), _OVERLOADED_BODY)
)


class ConnectionGuard:
    def __init__(
        self, *, max_connections: int, header_timeout_s: float, registry: CollectorRegistry
    ) -> None:
        self.max_connections = max_connections
        self.header_timeout_s = header_timeout_s
        self._lock = threading.Lock()
        self._deadlines: dict[socket.socket, float | None] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.open = Gauge(
            "fleetscope_ingest_open_connections",
            "Connections being served now.",
            registry=registry,
        )
        self.open.set_function(lambda: self.count)
        self.refused = Counter(
            "fleetscope_ingest_connections_refused",
            "Connections answered 503 because server.max_connections were open.",
            registry=registry,
        )
        self.timeouts = Counter(
            "fleetscope_ingest_timeouts",
            "Connections closed for sending too slowly, by phase (headers, body).",
            ["phase"],
            registry=registry,
        )

    def start(self) -> None:
        self._thread = threading.Thread(target=self._sweep, name="fleetscope-conn-sweeper")
        self._thread.daemon = True
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    @property
    def count(self) -> int:
        """Connections being served now."""
        with self._lock:
            return len(self._deadlines)

    def admit(self, sock: socket.socket) -> bool:
        """Take the connection in if there is room; the caller answers 503 otherwise."""
        with self._lock:
            if len(self._deadlines) >= self.max_connections > 0:
                self.refused.inc()
                return False
            self._deadlines[sock] = None
            return True

    def release(self, sock: socket.socket) -> None:
        with self._lock:
            self._deadlines.pop(sock, None)

    def awaiting_headers(self, sock: socket.socket) -> None:
        """The connection now waits for a request line and headers: the clock starts."""
        with self._lock:
            if sock in self._deadlines:
                self._deadlines[sock] = time.monotonic() + self.header_timeout_s

    def headers_read(self, sock: socket.socket) -> None:
        with self._lock:
            if sock in self._deadlines:
                self._deadlines[sock] = None

    def _sweep(self) -> None:
        tick = min(0.5, max(self.header_timeout_s / 4, 0.05))
        while not self._stop.wait(tick):
            now = time.monotonic()
            with self._lock:
                late = [s for s, d in self._deadlines.items() if d is not None and d < now]
                for sock in late:
                    self._deadlines[sock] = None
            for sock in late:
                self.timeouts.labels("headers").inc()
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked reading it
