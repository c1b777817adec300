"""Waiting for acknowledged rows to become readable (issue 27).

A batch is acknowledged once it is in the ingest log and readable after the writer's next flush
(`warehouse.log_flush_interval_s`, 1 s by default): a test that reads what it just sent waits for
the answer it asserts, with a generous limit for a busy machine, instead of reading once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(read: Callable[[], T], expected: T, limit_s: float = 60.0) -> T:
    """`read()` until it returns `expected`; its last answer (so a failed assert shows it)."""
    deadline = time.monotonic() + limit_s
    while (got := read()) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return got
