"""The server-wide budget of request bodies in memory, and giving freed memory back to the OS.

Why: every connection has its own thread, and each may hold a body of up to
`server.max_body_bytes` plus what decoding it builds; eight concurrent 60 MiB garbage bodies added
0.9 GB, so the 256-connection cap alone allowed about 28 GB (issue 28). `InFlightBytes` reserves a
body's declared Content-Length before a byte of it is read and releases it when the request is
answered; a request that would pass `server.max_inflight_bytes` is answered 503 with Retry-After
(the client retries later, its bytes unread) instead of growing the process.

After a burst glibc keeps freed arenas mapped, so RSS stayed at 3.2 GB after the issue's hostile
requests although nothing held them. When the last large body of a burst is released, `trim`
calls glibc's `malloc_trim(0)` (man 3 malloc_trim), which returns the free heap top and unused
pages of every arena; on another libc it does nothing.

Must never: block (a reservation is granted or refused at once), or trim while large bodies are
still being handled (that would only cost time).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import threading
from collections.abc import Callable
from functools import cache

from prometheus_client import CollectorRegistry, Counter, Gauge

log = logging.getLogger(__name__)

TRIM_AFTER_BYTES = 8 * 1024 * 1024
"""Bodies at least this large mark a burst worth trimming after (a normal agent batch is ~100 KB)."""


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError, TypeError):  # not glibc: nothing to trim
        return None
    return trim


def trim() -> bool:
    """Give free heap memory back to the OS (glibc); False where that is not available."""
    malloc_trim = _malloc_trim()
    if malloc_trim is None:
        return False
    malloc_trim(0)
    return True


class InFlightBytes:
    """A counter of reserved body bytes under a limit; thread-safe."""

    def __init__(self, limit_bytes: int, registry: CollectorRegistry | None = None) -> None:
        self.limit_bytes = limit_bytes
        self._lock = threading.Lock()
        self._reserved = 0
        self._large = 0
        self._large_seen = False
        self.refused = Counter(
            "fleetscope_server_inflight_refused",
            "Requests answered 503 because bodies in flight would pass server.max_inflight_bytes.",
            registry=registry,
        )
        gauge = Gauge(
            "fleetscope_server_inflight_bytes",
            "Request body bytes reserved by requests being handled.",
            registry=registry,
        )
        gauge.set_function(lambda: self._reserved)

    @property
    def reserved(self) -> int:
        return self._reserved

    def reserve(self, n: int) -> bool:
        """Reserve `n` bytes; False (nothing reserved) when that would pass the limit."""
        with self._lock:
            if self._reserved + n > self.limit_bytes:
                self.refused.inc()
                return False
            self._reserved += n
            if n >= TRIM_AFTER_BYTES:
                self._large += 1
                self._large_seen = True
            return True

    def release(self, n: int) -> None:
        """Release a reservation; trims the heap when the last large body of a burst is done."""
        with self._lock:
            self._reserved -= n
            if n >= TRIM_AFTER_BYTES:
                self._large -= 1
            due = self._large == 0 and self._large_seen
            if due:
                self._large_seen = False
        if due:
            trim()
