"""A fleet gateway's writer: batches requests, claims their ids, commits Parquet to Iceberg.

Same request side and writer thread as the embedded writer (warehouse.storage.group_writer.GroupWriter:
`submit` returns a Ticket the handler waits on, so 202 still means durable; poison isolation,
hooks and counters are shared), different commit: per table of a flush,

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
   Under the commit lock, before appending, the flush checks its claims (fencing, issue 30): a
   gateway slower than its lease (a loaded machine: the lock wait, the S3 writes) may have had
   claims taken over meanwhile; then it appends nothing and answers 503, and the gateway that
   took over commits them. A flush that took over claims of a live but slow gateway appends
   only the batches whose old flush did not land by then (the lock orders the two commits), and
   answers the others duplicate; a flush that took claims over and then fails hands them back
   to the flush it took them from (ledger.release), whose commit may still land. The
   end-to-end test found two copies of three or four batches under load before these.
4. run the commit hooks on the rows that landed (the arrival marks, warehouse.storage.arrival_hook, as the
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
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pyarrow as pa
from sqlalchemy import Engine

from fleetscope.errors import IngestError
from warehouse.catalog import ledger
from warehouse.fleet.commit_lock import table_commit_lock
from warehouse.fleet.tables import FLUSH_PROPERTY, FleetTables, to_table_schema
from warehouse.ingest.batch_digest import CONFLICT_STATUS, conflict_message
from warehouse.ingest.batch_queue import Ticket
from warehouse.ingest.shape_limits import UNLIMITED, ShapeLimits
from warehouse.storage.group_writer import Commit, CommitHook, GroupWriter

if TYPE_CHECKING:
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

# A stale claim whose dead flush is in the table's snapshots: stored, answered duplicate, and
# its rows go through the commit hooks (the dead gateway may have died before running them).
RECOVERED = "recovered"


class CommitGaveUpError(IngestError):
    """The Iceberg commit kept conflicting until the attempts or the lease ran out."""


class ClaimLostError(IngestError):
    """Another gateway took over a claim of this flush (its lease ran out): nothing appended."""


class _Landed(Exception):
    """A flush failed after its Iceberg commit landed: answered 503, never split or refused."""


class FleetWriter(GroupWriter):
    """One thread per gateway (GroupWriter); see the module docstring for the commit protocol."""

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
            committer="gateway",
            thread_name="fleetscope-gateway",
            flush_rows=flush_rows,
            flush_interval_s=flush_interval_s,
            flush_idle_s=flush_idle_s,
            queue_max_rows=queue_max_rows,
            hooks=hooks,
            shape_limits=shape_limits,
        )
        self.tables = tables
        self.catalog = catalog
        self._lease_s = lease_s
        self._attempts = commit_attempts
        self._flushes_landed = 0  # the Commit's seq: this writer's count, for hook logs only
        self.commit_conflicts = 0

    # -- writer thread (GroupWriter) --------------------------------------------------------
    def _prepare(self) -> None:
        self.tables.ensure_all()

    def _commit_groups(self, tickets: list[Ticket]) -> None:
        for name in dict.fromkeys(t.table for t in tickets):
            self._flush([t for t in tickets if t.table == name])

    def _may_split(self, exc: BaseException) -> bool:
        return not isinstance(exc, _Landed)

    def _commit_group(self, tickets: list[Ticket]) -> None:
        started = time.perf_counter()
        name = tickets[0].table
        flush_id = uuid.uuid4().hex
        claimed = time.monotonic()
        landed = False
        taken: dict[str, str] = {}  # batch id -> the flush its claim was taken over from
        try:
            verdicts = self._claim(tickets, flush_id)
            mine = [t for t in tickets if verdicts[t.batch_id][0] == "mine"]
            if mine:
                taken = {t.batch_id: verdicts[t.batch_id][1] for t in mine}
                stored = self._commit(name, mine, flush_id, claimed + self._lease_s, taken)
                landed = True
                for t in mine:
                    if t.batch_id in stored:  # its old flush landed first: a duplicate
                        verdicts[t.batch_id] = (RECOVERED, taken[t.batch_id])
                mine = [t for t in mine if t.batch_id not in stored]
            recovered = [t for t in tickets if verdicts[t.batch_id][0] == RECOVERED]
            self._run_landed_hooks(name, mine + recovered)
            if mine:
                with self.catalog.begin() as conn:
                    ledger.mark_committed(conn, flush_id, datetime.now(UTC))
        except Exception as exc:
            log.exception("gateway flush %s of %s failed", flush_id, name)
            if not landed:
                self._release_unless_landed(name, flush_id, {b: o for b, o in taken.items() if o})
                raise
            raise _Landed(str(exc)) from exc
        duplicates = 0
        for t in tickets:
            verdict, holder = verdicts[t.batch_id]
            if verdict == "conflict":
                self.stats.batches_refused += 1
                error = conflict_message(t.batch_id, holder, t.table)
                self._answer(t, error=error, status=CONFLICT_STATUS)
            elif verdict in ("committed", RECOVERED):
                duplicates += 1
                self._answer(t, duplicate=True)
            elif verdict == "mine":
                self._answer(t)
            else:
                error = f"batch {t.batch_id} is being stored by another gateway"
                self._answer(t, error=error, status=503)
        if mine:
            rows = sum(t.data.num_rows for t in mine)
            self._account({name: rows}, len(mine), duplicates, started)
        else:
            self.stats.duplicates += duplicates

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
                        verdicts[batch_id] = ("mine", owner)  # the old flush, checked again
                        #                                      under the commit lock
                    else:
                        verdicts[batch_id] = ("busy", owner)
        return verdicts

    def _commit(
        self,
        name: str,
        mine: Sequence[Ticket],
        flush_id: str,
        deadline: float,
        taken: dict[str, str],
    ) -> set[str]:
        """Append the rows of `mine` under the table's commit lock; the batch ids not appended
        because the flush they were taken over from (`taken`: batch id -> old flush id, "" when
        claimed fresh) landed first. ClaimLostError when a claim is no longer this flush's."""
        from pyiceberg.exceptions import CommitFailedException

        table = self.tables.table(name)
        stored: set[str] = set()
        for attempt in range(self._attempts):
            if time.monotonic() > deadline:
                break
            try:
                # One committer at a time per table (fleet.commit_lock): from the newest metadata,
                # so the append meets no concurrent gateway commit. What can still conflict is
                # the hourly upkeep's rewrite, which does not take the lock.
                with table_commit_lock(self.catalog, self.tables.identifier(name), deadline):
                    table.refresh()
                    stored = self._fence(table, mine, flush_id, taken)
                    rest = [t for t in mine if t.batch_id not in stored]
                    if rest:
                        data = pa.concat_tables([t.data for t in rest]).combine_chunks()
                        rows = to_table_schema(data, table)
                        table.append(rows, snapshot_properties={FLUSH_PROPERTY: flush_id})
                return stored
            except CommitFailedException:
                self.commit_conflicts += 1
                log.warning("Iceberg commit conflict on %s (attempt %d)", name, attempt + 1)
                table.refresh()
                if _has_flush(table, flush_id):  # the commit landed after all
                    return stored
                time.sleep(random.uniform(0, min(2.0, 0.05 * 2**attempt)))  # full jitter
        raise CommitGaveUpError(
            f"Iceberg commit of {name} kept conflicting ({self._attempts} attempts or the "
            f"{self._lease_s:.0f} s lease); retry with the same batch id",
            status=503,
        )

    def _fence(
        self, table: Table, mine: Sequence[Ticket], flush_id: str, taken: dict[str, str]
    ) -> set[str]:
        """Under the commit lock: ClaimLostError unless every claim of `mine` is still this
        flush's; the ids among them whose old flush (taken over) is in the snapshots now."""
        with self.catalog.begin() as conn:
            held = ledger.holders(conn, [t.batch_id for t in mine])
            lost = [t.batch_id for t in mine if held.get(t.batch_id) != (flush_id, ledger.PENDING)]
            if lost:
                raise ClaimLostError(
                    f"{len(lost)} batch(es) of this flush were taken over by another gateway "
                    f"after the {self._lease_s:.0f} s lease; retry with the same batch id",
                    status=503,
                )
            # A fresh lease for the append: only an append slower than a whole lease can now
            # see its claims taken over (and the taker's fence then finds this flush landed).
            ledger.renew(conn, flush_id, datetime.now(UTC))
        return {b for b, old in taken.items() if old and _has_flush(table, old)}

    def _run_landed_hooks(self, name: str, landed: Sequence[Ticket]) -> None:
        """The commit hooks on the rows of `landed` (their rows are in the table already)."""
        if not landed or not self._hooks:
            return
        self._flushes_landed += 1
        rows = pa.concat_tables([t.data for t in landed])
        self._run_hooks(Commit(self._flushes_landed, {name: rows}, landed))

    def _release_unless_landed(self, name: str, flush_id: str, taken: dict[str, str]) -> None:
        """Drop the claims of a failed flush, unless its commit landed after all (a lost answer):
        then the claims stay pending and the next copy finds the snapshot once the lease ends."""
        try:
            table = self.tables.table(name)
            table.refresh()
            if _has_flush(table, flush_id):
                return
            with self.catalog.begin() as conn:
                expired = datetime.now(UTC) - timedelta(seconds=self._lease_s)
                ledger.release(conn, flush_id, taken, expired)
        except Exception:  # the lease expires anyway
            log.exception("could not release the claims of flush %s", flush_id)


def _has_flush(table: Table, flush_id: str) -> bool:
    """Whether a snapshot of `table` was committed by the flush `flush_id` (summary property)."""
    for snapshot in reversed(table.metadata.snapshots):
        summary = snapshot.summary
        if summary is not None and summary.get(FLUSH_PROPERTY) == flush_id:
            return True
    return False
