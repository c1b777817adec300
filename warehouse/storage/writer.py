"""The embedded mode's store: one thread owns the telemetry DuckDB connection (the thread, the
ingest log, poison isolation, hooks and counters are warehouse.storage.group_writer's, shared with the
fleet gateway's writer; this module is the DuckDB-and-segments flush).

Why one thread: DuckDB allows one writing process (design.md), so request handlers never touch the
database; they `submit` a validated Arrow batch and wait on its `Ticket`. The thread groups batches
until `warehouse.flush_rows` rows, or `warehouse.flush_interval_s` seconds since the first, or
`warehouse.flush_idle_s` seconds without a new batch (agents wait for their 202 before sending
more: it is the closed loop of a fleet of agents), and acknowledges the group once it is in the
ingest log (`<database>.ingest-log/`, one fsync for the group; issue 27). Batch ids the ledger or
the log already hold are answered duplicate (same content) or 409 (other content or table).

About every `warehouse.log_flush_interval_s` the logged batches are flushed:

1. the rows of each table, time-sorted, become sealed Parquet segments (not live yet);
2. ONE transaction inserts each table from Arrow (`INSERT ... BY NAME SELECT`, never
   executemany), the ledger rows, the flush record naming the segments and the log position;
3. the segments are published in the manifest, the commit hooks run (the catalog's hosts, GPU
   allocations and arrival marks; a failing hook is logged, never fails the committed rows), and
   the flushed log segments are deleted.

A 202 means durable (in the log); the rows are readable after the next flush. On start the log's
records past the recorded position are replayed. A batch the store could never hold (a time out
of DuckDB's range) is refused 422 before it is logged; one that fails the flush on its data alone
is quarantined in the log's folder with an error. Any other failure (I/O, a full disk) leaves the
batches in the log and is retried. This module must never be used from more than one process on
the same file, and request threads must never call DuckDB.
"""

from __future__ import annotations

import contextlib
import dataclasses
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
from warehouse.migrations import migrate
from warehouse.storage import schema
from warehouse.storage.group_writer import (
    Commit,
    CommitHook,
    GroupWriter,
    WriterConfig,
    WriterStats,
)
from warehouse.storage.ingest_log import IngestLog, LogEntry, LogPosition, LogRecord
from warehouse.storage.ledger_filter import LedgerFilter
from warehouse.storage.log_entries import record_tickets
from warehouse.storage.segments import Segment, SegmentStore

__all__ = ["Commit", "CommitHook", "Writer", "WriterConfig", "WriterStats", "open_database"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class Writer(GroupWriter):
    """Owns the DuckDB file; see the module docstring for the flush protocol."""

    def __init__(
        self,
        duckdb_path: Path,
        store: SegmentStore,
        config: WriterConfig | None = None,
        *,
        hooks: Sequence[CommitHook] = (),
        tables: Mapping[str, pa.Schema] = TABLES,
        log_dir: Path | None = None,
        **options: Any,
    ) -> None:
        """`options` override single fields of `config` (WriterConfig), as tests do."""
        config = dataclasses.replace(config or WriterConfig(), **options)
        # the log belongs to its database: its flushed position is kept there
        ingest_log = IngestLog(log_dir or duckdb_path.with_suffix(".ingest-log"))
        super().__init__(config, hooks=hooks, ingest_log=ingest_log)
        self._store = store
        self._tables = dict(tables)
        self._calls: deque[tuple[Callable[[duckdb.DuckDBPyConnection], Any], Future[Any]]] = deque()
        self._conn = open_database(duckdb_path, self._tables)
        self._read_root = self._conn.cursor()
        self._read_lock = threading.Lock()
        self._next_seq = self._recover()
        self._ledger_filter = self._build_ledger_filter()

    # -- lifecycle (GroupWriter) -----------------------------------------------------------
    def _close(self) -> None:
        if self._log is not None:
            self._log.close()
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

    def flush_log_now(self, timeout_s: float = 120.0) -> None:
        """Flush the ingest log on the writer thread and wait for it (tests, tools that read
        what they just wrote without waiting for the background flush)."""
        self.call(lambda _conn: self.flush_log()).result(timeout_s)

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

    def _store_flush(self, records: Sequence[LogRecord], position: LogPosition) -> None:
        """One flush of logged batches: segments, one transaction (rows, ledger, flush record,
        log position), publish, hooks; raises if not committed."""
        started = time.perf_counter()
        seq = self._next_seq
        entries = [record.entry for record in records]
        written: dict[str, list[Segment]] = {}
        in_transaction = committed = False
        try:
            tables = {
                name: _time_sorted(
                    pa.concat_tables([e.data for e in entries if e.table == name]).combine_chunks()
                )
                for name in self._tables
                if any(e.table == name for e in entries)
            }
            for name, data in tables.items():
                written[name] = self._store.write(name, data, seq)
            self._conn.execute("BEGIN TRANSACTION")
            in_transaction = True
            for name, data in tables.items():
                _insert_arrow(self._conn, name, data)
            if entries:
                self._conn.execute(_LEDGER_INSERT, _ledger_columns(entries, seq))
                self._conn.execute(
                    "INSERT INTO ingest_flushes VALUES (?, current_timestamp, ?)",
                    [seq, [s.path for segs in written.values() for s in segs]],
                )
            self._conn.execute(
                "INSERT OR REPLACE INTO ingest_log_position VALUES (1, ?, ?)",
                [position.segment, position.offset],
            )
            self._conn.execute("COMMIT")
            in_transaction, committed = False, True
            if entries:
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
        if entries:
            self._ledger_filter.add(e.batch_id for e in entries)
            if self._ledger_filter.full:
                self._ledger_filter = self._build_ledger_filter()
            self._run_hooks(Commit(seq, tables, record_tickets(records)))
            rows = {name: data.num_rows for name, data in tables.items()}
            self._account(rows, 0, 0, started)

    def _build_ledger_filter(self) -> LedgerFilter:
        (count,) = self._conn.execute("SELECT count(*) FROM ingest_batches").fetchall()[0]
        ids = self._conn.execute("SELECT batch_id FROM ingest_batches")
        built = LedgerFilter(2 * int(count))
        while chunk := ids.fetchmany(10_000):
            built.add(str(row[0]) for row in chunk)
        return built

    def _flushed_position(self) -> LogPosition:
        rows = self._conn.execute(
            "SELECT segment, log_offset FROM ingest_log_position WHERE id = 1"
        ).fetchall()
        return LogPosition(int(rows[0][0]), int(rows[0][1])) if rows else LogPosition(0, 0)

    def _known_batches(self, batch_ids: list[str]) -> dict[str, tuple[str, str | None]]:
        """Ids already in the ledger, with their table and content digest: `IN (?, ...)` probes
        its primary key, where a join with a registered Arrow table scanned the whole ledger (8x
        the CPU at 300k rows)."""
        known: dict[str, tuple[str, str | None]] = {}
        batch_ids = [i for i in batch_ids if self._ledger_filter.may_hold(i)]
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


def _ledger_columns(entries: Sequence[LogEntry], seq: int) -> list[list[Any]]:
    return [
        [e.batch_id for e in entries],
        [e.table for e in entries],
        [e.rows for e in entries],
        [e.agent for e in entries],
        [seq] * len(entries),
        [e.received_at for e in entries],
        [e.digest or None for e in entries],
    ]


def _time_sorted(data: pa.Table) -> pa.Table:
    """Rows in time order: a flush's segment holds a second of many agents, interleaved."""
    return data.sort_by("ts") if "ts" in data.column_names else data


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
