"""One leader among the servers sharing a catalog, for work that must run once per fleet, not once
per gateway (the closed loop's tick: N gateways each ticking would request N times its budget).

On PostgreSQL the leader is whoever holds a session-level advisory lock (`pg_try_advisory_lock`)
on a key derived from the role's name, on a connection it keeps for as long as it leads. The lock
is PostgreSQL's to release: when the leader's process dies its connection closes and the lock is
free, and the next `leads()` of another server takes it, with no lease to tune. A leader checks
its connection on every `leads()`; a lost connection (database restart, network) is a lost lock,
and it leads again only by taking the lock anew. On SQLite (the embedded catalog, one server per
file) there is nobody to elect: `leads()` is always True.

Holds one pooled connection per role while leading, idle outside a transaction between calls.
Must never take part in another transaction: the lock's connection does nothing else.
"""

from __future__ import annotations

import hashlib
import logging
import threading

from sqlalchemy import Connection, Engine, func, select

log = logging.getLogger(__name__)


def lock_key(role: str) -> int:
    """A stable signed 64-bit advisory-lock key for `role` (the same in every process)."""
    digest = hashlib.sha256(f"fleetscope:{role}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class Leadership:
    def __init__(self, catalog: Engine, role: str) -> None:
        self.catalog = catalog
        self.role = role
        self.key = lock_key(role)
        self._shared = catalog.dialect.name != "postgresql"  # nobody else to elect
        self._conn: Connection | None = None
        self._lock = threading.Lock()

    def leads(self) -> bool:
        """True while this process holds the role: kept if its connection still answers, else
        taken if nobody holds it."""
        if self._shared:
            return True
        with self._lock:
            if self._conn is not None and not self._alive(self._conn):
                log.warning("leadership of %s lost with its catalog connection", self.role)
                self._drop()
            if self._conn is None:
                conn = self.catalog.connect()
                try:
                    taken = bool(conn.execute(select(func.pg_try_advisory_lock(self.key))).scalar())
                    conn.commit()  # the lock is the session's; no transaction stays open
                except Exception:
                    conn.close()
                    raise
                if not taken:
                    conn.close()
                    return False
                self._conn = conn
                log.info("this server now leads %s", self.role)
            return True

    def release(self) -> None:
        """Give the role up (at stop), so another server takes it on its next `leads()`."""
        with self._lock:
            if self._conn is not None:
                try:
                    self._conn.execute(select(func.pg_advisory_unlock(self.key)))
                    self._conn.commit()
                except Exception:
                    log.warning("unlocking %s failed; closing its connection frees it", self.role)
                self._drop()

    @staticmethod
    def _alive(conn: Connection) -> bool:
        try:
            conn.execute(select(1))
            conn.commit()
        except Exception:
            return False
        return True

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            conn.invalidate()  # never back to the pool still holding a session lock
        except Exception:
            log.debug("closing the %s lock connection failed", self.role, exc_info=True)
        finally:
            conn.close()
