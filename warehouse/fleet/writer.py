"""A fleet gateway's writer: batches requests, claims their ids, commits Parquet to Iceberg.

Same request side as the embedded writer (warehouse.writer.Writer: `submit` returns a Ticket the
handler waits on, so 202 still means durable), different commit: per table of a flush,

1. claim every batch id in the shared ledger (warehouse.catalog.ledger) under a fresh flush id;
   ids already committed are duplicates, ids held by a live gateway are answered 503 (retry),
   ids held past their lease by a dead gateway are resolved by looking for the dead flush id in
   the table's snapshots (found: stored, duplicate; not found: taken over);
2. append the claimed rows (sorted by time) to the Iceberg table: pyiceberg writes one Parquet
   file per (day, cluster) partition to the object store and commits a snapshot whose summary
   carries the flush id;
3. on a commit conflict (another gateway committed first), refresh the table metadata and retry,
   as the Iceberg spec prescribes for appends (they never conflict on data), with exponential
   backoff, and only within the lease: a gateway that cannot finish in time gives up rather than
   commit a batch another gateway may have taken over;
4. run the commit hooks on the rows that landed (the arrival marks, warehouse.arrivals, as the
   embedded writer does), then mark the claims committed and answer the tickets. A batch a dead
   gateway committed before it could mark it (found in the snapshots at step 1) goes through
   the hooks too: its rows landed, and their arrival marks may not have been written.

A flush that fails is retried one batch at a time, and a batch that fails alone on its data is
refused for good (422), as the embedded writer does (poison isolation, issue 12); any other
failure (S3 or PostgreSQL down, conflicts past the lease) is 503 and the agent retries.

Must never answer 202 before step 2 committed, nor hold a claim it has given up (it releases it).
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pyarrow as pa
from sqlalchemy import Engine

from fleetscope.errors import IngestError
from warehouse.batch_digest import CONFLICT_STATUS, conflict_message
from warehouse.batch_queue import BatchQueue, Ticket
from warehouse.catalog import ledger
from warehouse.fleet.tables import FLUSH_PROPERTY, FleetTables, to_table_schema
from warehouse.shape_limits import UNLIMITED, ShapeLimits
from warehouse.writer import Commit, CommitHook, WriterStats, _is_data_error

if TYPE_CHECKING:
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

# A stale claim whose dead flush is in the table's snapshots: stored, answered duplicate, and
# its rows go through the commit hooks (the dead gateway may have died before running them).
RECOVERED = "recovered"


class CommitGaveUpError(IngestError):
    """The Iceberg commit kept conflicting until the attempts or the lease ran out."""


class FleetWriter(BatchQueue):
    """One thread per gateway; see the module docstring for the commit protocol."""

    def __init__(
        self,
        tables: FleetTables,
        catalog: Engine,
        *,
        flush_rows: int,
        flush_interval_s: float,
        flush_idle_s: float,
        queue_max_rows: int,
        lease_s: float,
        commit_attempts: int,
        hooks: Sequence[CommitHook] = (),
        shape_limits: ShapeLimits = UNLIMITED,
    ) -> None:
        super().__init__(
            queue_name="gateway",
            owner="gateway",
            flush_rows=flush_rows,
            flush_interval_s=flush_interval_s,
            flush_idle_s=flush_idle_s,
            queue_max_rows=queue_max_rows,
            shape_limits=shape_limits,
        )
        self.tables = tables
        self.catalog = catalog
        self._lease_s = lease_s
        self._attempts = commit_attempts
        self._hooks = list(hooks)
        self._flushes_landed = 0  # the Commit's seq: this writer's count, for hook logs only
        self._thread: threading.Thread | None = None
        self.stats = WriterStats()
        self.commit_conflicts = 0

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        self.tables.ensure_all()
        self._thread = threading.Thread(target=self._run, name="fleetscope-gateway", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()

    # -- writer thread ---------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                batch = self._take_group()
                done = self._stopping and not batch
            for name in dict.fromkeys(t.table for t in batch):
                self._flush([t for t in batch if t.table == name])
            if done:
                return

    def _flush(self, tickets: Sequence[Ticket]) -> None:
        started = time.perf_counter()
        name = tickets[0].table
        flush_id = uuid.uuid4().hex
        claimed = time.monotonic()
        outcome: dict[str, str | None] = {}  # batch id -> None (stored), "dup", or an error
        conflicts: dict[str, str] = {}  # batch id -> why it is refused 409 (issue 28)
        landed = False
        try:
            verdicts = self._claim(tickets, flush_id)
            mine = [t for t in tickets if verdicts[t.batch_id][0] == "mine"]
            conflicts = {
                t.batch_id: conflict_message(t.batch_id, verdicts[t.batch_id][1], t.table)
                for t in tickets
                if verdicts[t.batch_id][0] == "conflict"
            }
            for t in tickets:
                verdict = verdicts[t.batch_id][0]
                outcome[t.batch_id] = (
                    None
                    if verdict == "mine"
                    else "dup"
                    if verdict in ("committed", RECOVERED)
                    else f"batch {t.batch_id} is being stored by another gateway"
                )
            recovered = [t for t in tickets if verdicts[t.batch_id][0] == RECOVERED]
            if mine:
                data = pa.concat_tables([t.data for t in mine])
                self._commit(name, data, flush_id, claimed + self._lease_s)
                landed = True
            self._run_hooks(name, mine + recovered)
            if mine:
                with self.catalog.begin() as conn:
                    ledger.mark_committed(conn, flush_id, datetime.now(UTC))
                self._account(name, data.num_rows, len(mine), started)
        except Exception as exc:
            log.exception("gateway flush %s of %s failed", flush_id, name)
            self.stats.failed_flushes += 1
            if not landed:
                self._release_unless_landed(name, flush_id)
                if len(tickets) > 1:  # poison isolation (issue 12): one batch at a time
                    for ticket in tickets:
                        self._flush([ticket])
                    return
            refused = not landed and _is_data_error(exc)
            if refused:
                self.stats.batches_refused += 1
            outcome = {
                t.batch_id: f"batch {t.batch_id} cannot be stored: {exc}"
                if refused
                else f"gateway could not commit: {exc}"
                for t in tickets
            }
            status = 422 if refused else 503
        else:
            status = 503
        with self._cond:
            for t in tickets:
                self._inflight.pop(t.batch_id, None)
                result = outcome[t.batch_id]
                if t.batch_id in conflicts:
                    self.stats.batches_refused += 1
                    t._resolve(error=conflicts[t.batch_id], status=CONFLICT_STATUS)
                elif result == "dup":
                    self.stats.duplicates += 1
                    t._resolve(duplicate=True)
                elif result is None:
                    t._resolve()
                else:
                    t._resolve(error=result, status=status)

    def _claim(self, tickets: Sequence[Ticket], flush_id: str) -> dict[str, tuple[str, str]]:
        """batch id -> (verdict, and for a conflict the table the ledger holds the id for)."""
        entries = [ledger.Entry(t.batch_id, t.table, t.rows, t.agent, t.digest) for t in tickets]
        now = datetime.now(UTC)
        with self.catalog.begin() as conn:
            claims = ledger.claim(conn, entries, flush_id, now, self._lease_s)
        verdicts = {batch_id: (str(c.verdict), c.owner) for batch_id, c in claims.items()}
        stale = {batch_id: c.owner for batch_id, c in claims.items() if c.verdict == "stale"}
        if stale:
            table = self.tables.table(tickets[0].table)
            table.refresh()
            for batch_id, owner in stale.items():
                with self.catalog.begin() as conn:
                    if _has_flush(table, owner):
                        ledger.mark_committed(conn, owner, now)
                        verdicts[batch_id] = (RECOVERED, owner)
                    elif ledger.take_over(conn, batch_id, owner, flush_id, now):
                        verdicts[batch_id] = ("mine", "")
                    else:
                        verdicts[batch_id] = ("busy", owner)
        return verdicts

    def _commit(self, name: str, data: pa.Table, flush_id: str, deadline: float) -> None:
        from pyiceberg.exceptions import CommitFailedException

        table = self.tables.table(name)
        rows = to_table_schema(data, table)
        for attempt in range(self._attempts):
            if time.monotonic() > deadline:
                break
            try:
                table.append(rows, snapshot_properties={FLUSH_PROPERTY: flush_id})
                return
            except CommitFailedException:
                self.commit_conflicts += 1
                table.refresh()
                if _has_flush(table, flush_id):  # the commit landed after all
                    return
                time.sleep(random.uniform(0, min(2.0, 0.05 * 2**attempt)))  # full jitter
        raise CommitGaveUpError(
            f"Iceberg commit of {name} kept conflicting ({self._attempts} attempts or the "
            f"{self._lease_s:.0f} s lease); retry with the same batch id",
            status=503,
        )

    def _run_hooks(self, name: str, landed: Sequence[Ticket]) -> None:
        """The commit hooks on the rows of `landed`; a hook's failure is logged, never the flush's
        (the rows are in the table already), as in the embedded writer."""
        if not landed or not self._hooks:
            return
        self._flushes_landed += 1
        commit = Commit(
            self._flushes_landed, {name: pa.concat_tables([t.data for t in landed])}, landed
        )
        for hook in self._hooks:
            try:
                hook(commit)
            except Exception:
                log.exception("commit hook %r failed for a flush of %s", hook, name)

    def _release_unless_landed(self, name: str, flush_id: str) -> None:
        """Drop the claims of a failed flush, unless its commit landed after all (a lost answer):
        then the claims stay pending and the next copy finds the snapshot once the lease ends."""
        try:
            table = self.tables.table(name)
            table.refresh()
            if _has_flush(table, flush_id):
                return
            with self.catalog.begin() as conn:
                ledger.release(conn, flush_id)
        except Exception:  # the lease expires anyway
            log.exception("could not release the claims of flush %s", flush_id)

    def _account(self, name: str, rows: int, batches: int, started: float) -> None:
        stats = self.stats
        stats.flushes += 1
        stats.batches_committed += batches
        stats.rows_committed[name] = stats.rows_committed.get(name, 0) + rows
        stats.last_flush_rows = rows
        stats.last_flush_s = time.perf_counter() - started


def _has_flush(table: Table, flush_id: str) -> bool:
    """Whether a snapshot of `table` was committed by the flush `flush_id` (summary property)."""
    for snapshot in reversed(table.metadata.snapshots):
        summary = snapshot.summary
        if summary is not None and summary.get(FLUSH_PROPERTY) == flush_id:
            return True
    return False
