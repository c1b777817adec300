"""The embedded mode's writer: one thread owns the telemetry DuckDB connection and commits
micro-batches (the thread, poison isolation, hooks and counters are warehouse.storage.group_writer's,
shared with the fleet gateway's writer; this module is the DuckDB-and-segments commit).

Why one thread: DuckDB allows one writing process and pays about 1 ms per commit (design.md), so
request handlers never touch the database; they `submit` a validated Arrow batch and wait on its
`Ticket`. The thread drains the bounded queue and groups batches until `warehouse.flush_rows` rows, or
`warehouse.flush_interval_s` seconds since the first, or `warehouse.flush_idle_s` seconds without a
new batch (agents wait for their 202 before sending more, so once arrivals stop, waiting longer
only adds latency and cuts throughput: it is the closed loop of a fleet of agents). Per flush:

1. drops batches whose id is already in the `ingest_batches` ledger (exact dedup across restarts;
   a retry of a batch still in the queue joins the first one's ticket instead); an id the ledger
   holds with another content digest or table is refused 409 (issue 28: never a silent drop);
2. writes the rows of each table as sealed Parquet segments (not live yet);
3. in ONE transaction inserts each table from Arrow (`INSERT ... BY NAME SELECT`, never
   executemany), the ledger rows, and the flush record naming the segments;
4. publishes the segments in the manifest, runs the commit hooks (the catalog's hosts and GPU
   allocations; a failing hook is logged, never fails the committed rows), answers the tickets.

A ticket is answered only after step 3 committed, so a 202 means durable. A group that fails is
retried one batch at a time (poison isolation, issue 12): one bad batch must not fail its
neighbours. A batch that fails alone on its data (a DuckDB conversion or constraint error, an
Arrow error) is refused for good (`Ticket.status` 422: the agent dead-letters it); any other
failure (I/O, a full disk) stays retryable (503). This module must never be used from more than
one process on the same file, and request threads must never call DuckDB.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import pyarrow as pa

from fleetscope.contract import TABLES
from fleetscope.errors import ConfigError, IngestError
from warehouse.ingest.batch_digest import CONFLICT_STATUS, conflict_message
from warehouse.ingest.batch_queue import Ticket
from warehouse.ingest.shape_limits import UNLIMITED, ShapeLimits
from warehouse.migrations import migrate
from warehouse.storage import schema
from warehouse.storage.group_writer import Commit, CommitHook, GroupWriter, WriterStats
from warehouse.storage.segments import Segment, SegmentStore

__all__ = ["Commit", "CommitHook", "Writer", "WriterStats", "open_database"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class Writer(GroupWriter):
    """Owns the DuckDB file; see the module docstring for the flush protocol."""

    def __init__(
        self,
        duckdb_path: Path,
        store: SegmentStore,
        *,
        flush_rows: int,
        flush_interval_s: float,
        queue_max_rows: int,
        flush_idle_s: float = 0.05,
        hooks: Sequence[CommitHook] = (),
        tables: Mapping[str, pa.Schema] = TABLES,
        shape_limits: ShapeLimits = UNLIMITED,
    ) -> None:
        super().__init__(
            queue_name="ingest",
            owner="server",
            committer="writer",
            thread_name="fleetscope-writer",
            flush_rows=flush_rows,
            flush_interval_s=flush_interval_s,
            flush_idle_s=flush_idle_s,
            queue_max_rows=queue_max_rows,
            hooks=hooks,
            shape_limits=shape_limits,
        )
        self._store = store
        self._tables = dict(tables)
        self._calls: deque[tuple[Callable[[duckdb.DuckDBPyConnection], Any], Future[Any]]] = deque()
        self._conn = open_database(duckdb_path, self._tables)
        self._read_root = self._conn.cursor()
        self._read_lock = threading.Lock()
        self._next_seq = self._recover()

    # -- lifecycle (GroupWriter) -----------------------------------------------------------
    def _close(self) -> None:
        self._read_root.close()
        self._conn.close()

    # -- request side: submit (BatchQueue) and calls on the writer's connection ------------
    def call(self, fn: Callable[[duckdb.DuckDBPyConnection], T]) -> Future[T]:
        """Run `fn(connection)` on the writer thread between flushes (retention, maintenance)."""
        future: Future[T] = Future()
        with self._cond:
            if self._stopping:
                raise IngestError("writer is stopping", status=503)
            self._calls.append((fn, future))
            self._cond.notify_all()
        return future

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A read cursor on the same database: sees every committed row, never blocks the writer."""
        with self._read_lock:
            return self._read_root.cursor()

    # -- writer thread ---------------------------------------------------------------------
    def _has_other_work(self) -> bool:
        return bool(self._calls)

    def _other_work(self) -> None:
        with self._cond:
            calls = list(self._calls)
            self._calls.clear()
        for fn, future in calls:
            self._run_call(fn, future)

    def _run_call(
        self, fn: Callable[[duckdb.DuckDBPyConnection], Any], future: Future[Any]
    ) -> None:
        try:
            future.set_result(fn(self._conn))
        except Exception as exc:
            log.exception("writer call failed")
            future.set_exception(exc)

    def _commit_group(self, tickets: list[Ticket]) -> None:
        """One flush: segments, one transaction, publish, hooks, answers; raises if not committed."""
        started = time.perf_counter()
        seq = self._next_seq
        written: dict[str, list[Segment]] = {}
        in_transaction = committed = False
        try:
            known = self._known_batches([t.batch_id for t in tickets])
            conflicts = {
                t.batch_id: conflict_message(t.batch_id, known[t.batch_id][0], t.table)
                for t in tickets
                if t.batch_id in known and not _same_content(known[t.batch_id], t)
            }
            fresh = [t for t in tickets if t.batch_id not in known]
            tables = {
                # parts of one ticket are slices of its table: one chunk again (issue 27)
                name: pa.concat_tables([t.data for t in fresh if t.table == name]).combine_chunks()
                for name in self._tables
                if any(t.table == name for t in fresh)
            }
            for name, data in tables.items():
                written[name] = self._store.write(name, data, seq)
            if fresh:
                self._conn.execute("BEGIN TRANSACTION")
                in_transaction = True
                for name, data in tables.items():
                    _insert_arrow(self._conn, name, data)
                self._conn.execute(_LEDGER_INSERT, _ledger_columns(fresh, seq))
                self._conn.execute(
                    "INSERT INTO ingest_flushes VALUES (?, current_timestamp, ?)",
                    [seq, [s.path for segs in written.values() for s in segs]],
                )
                self._conn.execute("COMMIT")
                in_transaction, committed = False, True
                self._next_seq += 1
                self._store.publish(seq, written)
        except Exception:
            if in_transaction:
                self._conn.execute("ROLLBACK")
            with contextlib.suppress(Exception):
                self._conn.unregister("incoming")
            if not committed:  # committed segments stay: the next start's _recover publishes them
                self._store.discard(s for segs in written.values() for s in segs)
            raise
        self._run_hooks(Commit(seq, tables, fresh))
        for ticket in tickets:
            if ticket.batch_id in conflicts:
                self._answer(ticket, error=conflicts[ticket.batch_id], status=CONFLICT_STATUS)
            else:
                self._answer(ticket, duplicate=ticket.batch_id in known)
        if conflicts:
            self.stats.batches_refused += len(conflicts)
            log.warning("refused %d reused batch ids with other content (409)", len(conflicts))
        rows = {name: data.num_rows for name, data in tables.items()}
        self._account(rows, len(fresh), len(tickets) - len(fresh) - len(conflicts), started)

    def _known_batches(self, batch_ids: list[str]) -> dict[str, tuple[str, str | None]]:
        """Ids already in the ledger, with their table and content digest: `IN (?, ...)` probes
        its primary key, where a join with a registered Arrow table scanned the whole ledger (8x
        the CPU at 300k rows)."""
        known: dict[str, tuple[str, str | None]] = {}
        for at in range(0, len(batch_ids), _KNOWN_CHUNK):
            chunk = batch_ids[at : at + _KNOWN_CHUNK]
            marks = ", ".join("?" * len(chunk))
            rows = self._conn.execute(
                "SELECT batch_id, table_name, digest FROM ingest_batches "
                f"WHERE batch_id IN ({marks})",
                chunk,
            ).fetchall()
            known.update((str(r[0]), (str(r[1]), r[2])) for r in rows)
        return known

    def _recover(self) -> int:
        """Publish flushes committed after the manifest's last swap; return the next sequence."""
        published = self._store.snapshot().published_seq
        rows = self._conn.execute(
            "SELECT flush_seq, segments FROM ingest_flushes WHERE flush_seq > ? ORDER BY 1",
            [published],
        ).fetchall()
        late = self._store.reconcile({int(seq): list(names) for seq, names in rows})
        if late:
            log.warning("published %d segments committed before the last shutdown", late)
        top = self._conn.execute("SELECT coalesce(max(flush_seq), 0) FROM ingest_flushes")
        (committed,) = top.fetchall()[0]
        return max(int(committed), published) + 1


def _same_content(stored: tuple[str, str | None], ticket: Ticket) -> bool:
    """Whether a ledger entry is this ticket's batch: same table and digest (an entry written
    before digests existed has none, and is taken for the same batch, the old rule)."""
    table, digest = stored
    return table == ticket.table and (digest is None or digest == ticket.digest)


_KNOWN_CHUNK = 500  # ids per ledger probe: a flush of thousands of batches stays a few queries
# The ledger rows as seven list parameters: half the CPU of registering an Arrow table for them.
_LEDGER_INSERT = (
    "INSERT INTO ingest_batches "
    "(batch_id, table_name, rows, agent, flush_seq, received_at, digest) "
    "SELECT unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::BIGINT[]), "
    "unnest(?::VARCHAR[]), unnest(?::BIGINT[]), unnest(?::TIMESTAMPTZ[]), unnest(?::VARCHAR[])"
)


def _insert_arrow(conn: duckdb.DuckDBPyConnection, table: str, incoming: pa.Table) -> None:
    """INSERT BY NAME from an Arrow table that DuckDB finds by its replacement scan of this
    frame's local `incoming` (no register/unregister round trip: 45 % less CPU for a small flush).
    """
    conn.execute(f"INSERT INTO {table} BY NAME SELECT * FROM incoming")


def _ledger_columns(tickets: list[Ticket], seq: int) -> list[list[Any]]:
    return [
        [t.batch_id for t in tickets],
        [t.table for t in tickets],
        [t.rows for t in tickets],
        [t.agent for t in tickets],
        [seq] * len(tickets),
        [t.received_at for t in tickets],
        [t.digest or None for t in tickets],
    ]


def open_database(
    path: Path, tables: Mapping[str, pa.Schema] = TABLES
) -> duckdb.DuckDBPyConnection:
    """Open (creating if needed) and migrate the telemetry database; clear error if it is held."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = duckdb.connect(str(path))
    except duckdb.IOException as exc:
        raise ConfigError(
            f"telemetry database {path} is in use by another process ({exc}); only the "
            "ingest server writes it: read through warehouse.read.reader instead"
        ) from exc
    conn.execute("SET TimeZone = 'UTC'")
    migrate(conn)
    schema.check_tables(conn, tables)
    return conn
