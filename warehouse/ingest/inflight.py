"""The server-wide budget of request bodies in memory, and giving freed memory back to the OS.

Why: every connection has its own thread, and each may hold a body of up to
`server.max_body_bytes` plus what decoding it builds; eight concurrent 60 MiB garbage bodies added
0.9 GB, so the 256-connection cap alone allowed about 28 GB (issue 28). `InFlightBytes` reserves a
body's declared Content-Length before a byte of it is read and releases it when the request is
answered; a request that would pass `server.max_inflight_bytes` is answered 503 with Retry-After
(the client retries later, its bytes unread) instead of growing the process.

After a burst glibc keeps freed arenas mapped, so RSS stayed at 3.2 GB after the issue's hostile
requests although nothing held them. When the last large body of a burst is released, `trim`
runs the cycle collector and calls glibc's `malloc_trim(0)` (man 3 malloc_trim), which returns the free heap top and unused
pages of every arena; on another libc it does nothing.

Must never: block (a reservation is granted or refused at once), or trim while large bodies are
still being handled (that would only cost time).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import threading
from functools import cache

from prometheus_client import CollectorRegistry, Counter, Gauge

log = logging.getLogger(__name__)

TRIM_AFTER_BYTES = 1024 * 1024
"""Bodies at least this large mark a burst worth trimming after (a normal agent batch is ~100 KB)."""


M_MMAP_THRESHOLD = -3  # glibc malloc.h
MMAP_THRESHOLD_BYTES = 1024 * 1024


@cache
def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.malloc_trim  # noqa: B018  (glibc only)
        libc.mallopt  # noqa: B018
    except (OSError, AttributeError, TypeError):  # not glibc: nothing to tune or trim
        return None
    return libc


def map_large_allocations() -> bool:
    """Serve allocations of 1 MiB and more from their own mappings, returned at free.

    Why: glibc raises its mmap threshold each time a mapped chunk is freed (up to 32 MiB), so
    after the first large body, later ones came from thread arenas that fragment and stay
    resident (RSS +64 MiB after a burst of 16 MiB bodies, trimmed or not). Fixing the threshold
    (mallopt M_MMAP_THRESHOLD) keeps body-sized buffers out of the arenas.
    """
    libc = _glibc()
    return bool(libc is not None and libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))


def trim() -> bool:
    """Give free heap memory back to the OS (glibc); False where that is not available.

    A refused body is usually still referenced from a cycle (the exception's traceback holds the
    frame that holds the body), freed only by the cycle collector: collect first, then trim."""
    gc.collect()
    libc = _glibc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


class InFlightBytes:
    """A counter of reserved body bytes under a limit; thread-safe."""

    def __init__(self, limit_bytes: int, registry: CollectorRegistry | None = None) -> None:
        self.limit_bytes = limit_bytes
        map_large_allocations()
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
