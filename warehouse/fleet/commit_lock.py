"""Exactly one committer per Iceberg table across every gateway: a PostgreSQL session advisory lock.

Why: Iceberg commits are optimistic; with every gateway appending on its own, their commits raced
for the table's metadata pointer (140 commit-conflict retries in 8 minutes with 2 gateways, a
commit given up with 3; issue 27). Iceberg's streaming sinks (Flink, Kafka Connect) commit from a
single committer per table for this reason. Gateways share PostgreSQL already, so each one's
committer (warehouse.fleet.committer) tries, every commit interval, to take each table's lock
with `pg_try_advisory_lock` on a connection of its own, and keeps it as long as that connection
lives: one holder per table, never a wait. When the holder dies (`kill -9`), PostgreSQL ends its
session as the connection drops and releases the lock; another gateway takes it at its next try.
Before each commit the holder checks its connection still answers: a committer whose session is
gone (a PostgreSQL restart, a network cut) stops committing before another can take over.
This module must never touch telemetry rows.
"""

from __future__ import annotations

import hashlib
import logging

from sqlalchemy import Connection, Engine, text

__all__ = ["CommitterLease", "lock_key"]

log = logging.getLogger(__name__)


def lock_key(table: str) -> int:
    """A stable signed 64-bit advisory-lock key for `table` (the same in every gateway)."""
    digest = hashlib.sha256(f"fleetscope.commit/{table}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class CommitterLease:
    """The tables this process is the committer of; one PostgreSQL session holds their locks.
    Used by one thread at a time."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._conn: Connection | None = None
        self.held: set[str] = set()

    def hold(self, table: str) -> bool:
        """Whether this process is `table`'s committer now: keeps the lock it holds (after
        checking the session is alive) or takes it if free. Never waits."""
        try:
            conn = self._session()
            if table in self.held:
                conn.execute(text("SELECT 1"))
                return True
            taken = conn.execute(
                text("SELECT pg_try_advisory_lock(:key)"), {"key": lock_key(table)}
            ).scalar_one()
        except Exception:
            log.exception("committer session lost; holding no table's commit lock")
            self._drop()
            return False
        if taken:
            self.held.add(table)
            log.info("this gateway is now the committer of %s", table)
        return bool(taken)

    def release_all(self) -> None:
        """Give every lock up (a clean stop): the other gateways take them at their next try."""
        if self._conn is not None:
            try:
                self._conn.execute(text("SELECT pg_advisory_unlock_all()"))
            except Exception:
                log.exception("could not release the commit locks (the session's end will)")
        self._drop()

    def _session(self) -> Connection:
        if self._conn is None:
            self._conn = self._engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        return self._conn

    def _drop(self) -> None:
        self.held.clear()
        if self._conn is not None:
            try:
                self._conn.invalidate()  # never back to the pool with locks on it
                self._conn.close()
            except Exception:
                log.debug("closing the committer session failed", exc_info=True)
            self._conn = None
