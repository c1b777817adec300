"""A fleet gateway's writer: acknowledges on its own ingest log, stages data files for the committer.

The same writer thread, ingest log and group commit as the embedded server
(warehouse.storage.group_writer.GroupWriter): a group of batches is acknowledged (202) once it is
appended to this gateway's local log (`<core.data_dir>/gateway-log/<gateway>/`) and fsynced, one
fsync for every request of the group window. The exactly-once ledger stays in PostgreSQL
(warehouse.catalog.ledger): a batch id the ledger holds is answered duplicate (same content) or
409 (other content), before it is logged.

About every `warehouse.log_flush_interval_s` the logged batches are flushed (`_store_flush`), in
ONE PostgreSQL transaction:

1. their ledger entries are inserted as stored (`ledger.record_stored`); an id another gateway
   staged first (an agent's retry that reached two gateways) is dropped from this flush;
2. the rest, per table sorted by (cluster, ts), are written to the object store as Iceberg data
   files, one per (day, cluster) partition (pyiceberg's own writer: field ids and statistics as
   `table.append` writes them), and each file is recorded in the staging table
   (warehouse.catalog.staging).

So a crash never loses nor duplicates: before the transaction commits, the batches are still in
the log and replayed on the gateway's next start (the ledger tells which a crash after the commit
already staged); a file written by a transaction that rolled back is an orphan the upkeep's sweep
removes. The Iceberg commit is not here: exactly one committer per table (warehouse.fleet.committer)
appends every gateway's staged files, so gateways never race for a table's metadata. The commit
hooks (hosts, GPU allocations, arrival marks) run on the staged rows, off the ack path. A
flush that fails (S3 or PostgreSQL down) leaves the batches logged and is retried; agents keep
getting 202 until the log holds `warehouse.queue_max_rows`, then 503.
"""

from __future__ import annotations

import logging
import struct
import time
import uuid
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
from sqlalchemy import Engine

from warehouse.catalog import ledger, staging
from warehouse.fleet.tables import FleetTables, to_table_schema
from warehouse.storage.group_writer import Commit, CommitHook, GroupWriter, WriterConfig
from warehouse.storage.ingest_log import START, IngestLog, LogPosition, LogRecord
from warehouse.storage.log_entries import record_tickets

if TYPE_CHECKING:
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

__all__ = ["FleetWriter", "write_data_files"]


class FleetWriter(GroupWriter):
    """One writer thread per gateway (GroupWriter); see the module docstring."""

    queue_name = "gateway"
    owner = "gateway"
    committer = "gateway"
    thread_name = "fleetscope-gateway"

    def __init__(
        self,
        tables: FleetTables,
        catalog: Engine,
        config: WriterConfig,
        *,
        gateway: str,
        log_dir: Path,
        hooks: Sequence[CommitHook] = (),
    ) -> None:
        super().__init__(config, hooks=hooks, ingest_log=IngestLog(log_dir))
        self.tables = tables
        self.catalog = catalog
        self.gateway = gateway
        self._flushes = 0  # the Commit's seq: this writer's count, for hook logs only
        self.files_staged = 0
        self.retries_dropped = 0  # logged batches another gateway had staged first
        self._flush_waiters: deque[Future[None]] = deque()

    def flush_log_now(self, timeout_s: float = 120.0) -> None:
        """Stage every logged batch now, on the writer thread, and wait for it (tests, and tools
        that read what they just wrote without waiting for the background flush)."""
        done: Future[None] = Future()
        with self._cond:
            self._flush_waiters.append(done)
            self._cond.notify_all()
        done.result(timeout_s)

    # -- GroupWriter -----------------------------------------------------------------------
    def _prepare(self) -> None:
        self.tables.ensure_all()

    def _close(self) -> None:
        if self._log is not None:
            self._log.close()

    def _has_other_work(self) -> bool:
        return bool(self._flush_waiters)

    def _other_work(self) -> None:
        with self._cond:
            waiters = list(self._flush_waiters)
            self._flush_waiters.clear()
        if not waiters:
            return
        try:
            self.flush_log()
        except Exception as exc:
            for waiter in waiters:
                waiter.set_exception(exc)
        else:
            for waiter in waiters:
                waiter.set_result(None)

    def _known_batches(self, batch_ids: list[str]) -> dict[str, tuple[str, str | None]]:
        with self.catalog.connect() as conn:
            return ledger.known(conn, batch_ids)

    def _flushed_position(self) -> LogPosition:
        """The whole log is replayed; what the ledger holds is skipped (a flush rolls the log and
        deletes the flushed segments, so the replay is at most the unflushed ones)."""
        return START

    def _store_flush(self, records: Sequence[LogRecord], position: LogPosition) -> None:
        if not records:
            return
        started = time.perf_counter()
        flush_id = uuid.uuid4().hex
        entries = [
            ledger.Entry(
                r.entry.batch_id, r.entry.table, r.entry.rows, r.entry.agent, r.entry.digest
            )
            for r in records
        ]
        written: dict[str, pa.Table] = {}
        with self.catalog.begin() as conn:
            fresh_ids = ledger.record_stored(conn, entries, flush_id, datetime.now(UTC))
            fresh = [r for r in records if r.entry.batch_id in fresh_ids]
            files: list[staging.StagedFile] = []
            for name in dict.fromkeys(r.entry.table for r in fresh):
                data = pa.concat_tables([r.entry.data for r in fresh if r.entry.table == name])
                written[name] = data.combine_chunks()
                files += self._write_files(name, written[name])
            staging.stage(conn, files)
        dropped = len(records) - len(fresh)
        if dropped:
            self.retries_dropped += dropped
            log.warning("%d logged batches were staged by another gateway first (retries)", dropped)
        self.files_staged += len(files)
        if fresh:
            self._flushes += 1
            self._run_hooks(Commit(self._flushes, written, record_tickets(fresh)))
            self._account({n: d.num_rows for n, d in written.items()}, 0, 0, started)

    # -- staging ---------------------------------------------------------------------------
    def _write_files(self, name: str, data: pa.Table) -> list[staging.StagedFile]:
        """`data` written as the table's data files (one per partition, sorted by time)."""
        table = self.tables.table(name)
        return write_data_files(name, table, to_table_schema(data, table), self.gateway)


def write_data_files(
    name: str, table: Table, rows: pa.Table, gateway: str
) -> list[staging.StagedFile]:
    """`rows` (in the table's Arrow schema, sorted) written to the object store as `table`'s
    data files, one per partition (pyiceberg's own writer: field ids and statistics as
    `table.append` writes them), described for the staging table; nothing is committed."""
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    ts_id = table.schema().find_field("ts").field_id
    return [
        staging.StagedFile(
            path=data_file.file_path,
            table_name=name,
            rows=int(data_file.record_count),
            file_bytes=int(data_file.file_size_in_bytes),
            partition=table.spec().partition_to_path(data_file.partition, table.schema()),
            min_ts=_micros(data_file.lower_bounds[ts_id]),
            max_ts=_micros(data_file.upper_bounds[ts_id]),
            gateway=gateway,
        )
        for data_file in _dataframe_to_data_files(table.metadata, rows, table.io)
    ]


def _micros(bound: bytes) -> datetime:
    """An Iceberg timestamptz bound (8 bytes, little-endian microseconds) as a UTC datetime."""
    (us,) = struct.unpack("<q", bound)
    return datetime.fromtimestamp(us / 1_000_000, UTC)
