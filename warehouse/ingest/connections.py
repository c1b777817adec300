"""How many connections the ingest server holds, and the counters of those it refused or timed out.

Why: before issue 12 nothing bounded either: 300 half-sent requests held 300 threads for over a
minute. `ConnectionGuard` admits at most `max_connections` at once; the protocol
(warehouse.ingest.protocol) answers the next one `OVERLOADED` (503 with Retry-After) and closes
it, and closes a connection that has not sent its request line and headers within
`server.header_timeout_s` of starting to wait for them (an idle kept-alive connection included).
Body reads have their own deadline (warehouse.ingest.handler), answered 408.

Every call comes from the server's event loop thread; `count` is also read by a /metrics scrape
on a route thread, which an int read makes safe.

Must never: block the event loop (admit and release are an integer compare and add).
"""

from __future__ import annotations

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
        self.count = 0
        """Connections being served now."""
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

    def admit(self) -> bool:
        """Take a connection in if there is room; the caller answers 503 otherwise."""
        if self.count >= self.max_connections > 0:
            self.refused.inc()
            return False
        self.count += 1
        return True

    def release(self) -> None:
        self.count -= 1
