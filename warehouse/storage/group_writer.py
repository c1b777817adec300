"""The one writer thread both modes run: take a group of queued batches, make it durable, isolate
a poison batch, run the commit hooks, answer every ticket.

With an ingest log (`warehouse.storage.ingest_log`; the embedded store) a group is acknowledged once it is
appended to the log with its ledger entries and the log fsynced: one fsync for every request of
the group window, from all agents (issue 27). The ledger check (409 for a reused id with other
content, duplicate for the same content) sees both the store's ledger and the batches logged but
not yet flushed. About every `log_flush_interval_s` (and at stop) the logged batches are flushed
to the store in ONE `_store_flush` (a Parquet segment per table, the rows, ledger, flush record
and log position in one transaction), the commit hooks run on them (catalog upserts, arrival
marks: off the ack path), and the flushed log segments are deleted. Once `flush_rows` rows are
logged they are flushed before the group that reached them is answered (backpressure for
imports). On start the records past the store's log position are replayed. A logged batch the
store then refuses on its data alone is quarantined in the log's folder with an error, never
dropped.

Why one class: the embedded writer (warehouse.storage.writer, DuckDB and Parquet segments) and a fleet
gateway's (warehouse.fleet.writer, Iceberg and the PostgreSQL ledger) differ only in how a group
is made durable; the thread, the poison isolation of issue 12 (a failed group is retried batch by
batch; a batch that fails alone on its data is refused 422 for good, any other failure is 503 and
retried by its agent), the commit hooks (a failing hook is logged, never fails committed rows) and
the counters are the same contract, and two copies drifted. A subclass implements `_commit_group`
(durable, then answers with `_answer`) and may override `_may_split`, `_prepare` and `_close`.
Request threads never call anything here but `submit` (BatchQueue).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc

from fleetscope.errors import IngestError
from warehouse.ingest.batch_digest import CONFLICT_STATUS, conflict_message
from warehouse.ingest.batch_queue import BatchQueue, Ticket, expand_parts
from warehouse.storage.ingest_log import IngestLog, LogPosition, LogRecord
from warehouse.storage.log_entries import (
    is_data_error,
    ledger_key,
    log_entry,
    same_content,
    storable_refusal,
)
from warehouse.storage.writer_config import WriterConfig

log = logging.getLogger(__name__)

__all__ = ["Commit", "CommitHook", "GroupWriter", "WriterConfig", "WriterStats", "is_data_error"]


@dataclass(frozen=True)
class Commit:
    """What one flush committed, handed to the commit hooks."""

    seq: int
    tables: Mapping[str, pa.Table]
    tickets: Sequence[Ticket]


CommitHook = Callable[[Commit], None]


@dataclass
class WriterStats:
    """Counters the /metrics collector reads; only the writer thread updates them."""

    flushes: int = 0
    rows_committed: dict[str, int] = field(default_factory=dict)
    batches_committed: int = 0
    duplicates: int = 0
    failed_flushes: int = 0
    batches_refused: int = 0
    last_flush_s: float = 0.0
    last_flush_rows: int = 0
    groups_logged: int = 0  # fsyncs of the ingest log that acknowledged batches
    batches_quarantined: int = 0  # logged batches the store refused on their data
    # Logged and acknowledged, not yet flushed to the store: their Arrow bytes, and since when
    # (time.monotonic()) the oldest of them waits; None when nothing waits.
    log_pending_bytes: int = 0
    log_pending_since: float | None = None


class GroupWriter(BatchQueue):
    """A BatchQueue drained by one thread that commits groups; see the module docstring.
    A subclass names itself (the class attributes below) and supplies its store."""

    queue_name = "ingest"  # in BatchQueue's messages
    owner = "server"
    committer = "writer"  # who "could not commit" in a 503's message
    thread_name = "fleetscope-writer"

    def __init__(
        self,
        config: WriterConfig,
        *,
        hooks: Sequence[CommitHook],
        ingest_log: IngestLog | None = None,
    ) -> None:
        super().__init__(
            owner=self.owner,
            queue_name=self.queue_name,
            flush_rows=config.flush_rows,
            flush_interval_s=config.flush_interval_s,
            flush_idle_s=config.flush_idle_s,
            queue_max_rows=config.queue_max_rows,
            shape_limits=config.shape_limits,
        )
        self.config = config
        self._hooks = list(hooks)
        self._thread: threading.Thread | None = None
        self.stats = WriterStats()
        self._log = ingest_log
        self._log_flush_interval_s = config.log_flush_interval_s
        # Logged, acknowledged, not yet in the store; only the writer thread touches these.
        self._pending: list[LogRecord] = []
        self._pending_ids: dict[str, tuple[str, str]] = {}
        self._pending_rows = 0
        self._last_log_flush = time.monotonic()  # a replay is flushed in `start`

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        self._prepare()
        if self._log is not None:
            self._replay_log(self._log)
            if self._pending:  # readable (and in the remote_write watermarks) from the start
                self._flush_log()
            self._last_log_flush = time.monotonic()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Commit everything queued, then release the store (`_close`)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
        self._close()

    def _prepare(self) -> None:
        """Before the thread starts (a fleet gateway creates its tables)."""

    def _close(self) -> None:
        """After the thread ended (the embedded writer closes DuckDB)."""

    # -- writer thread ---------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                batch = self._take_group(self._has_other_work, self._log_flush_due_at())
                done = self._stopping and not batch and not self._has_other_work()
            if batch:
                expanded = [part for ticket in batch for part in expand_parts(ticket)]
                self._commit_groups(expanded)
                for ticket in batch:
                    if ticket.parts:
                        self._answer_parts(ticket)
            self._other_work()
            if self._pending and (done or self._log_flush_due()):
                self._flush_log()
            if done:
                return

    def _commit_groups(self, tickets: list[Ticket]) -> None:
        """One group per store commit (the fleet store commits each table on its own)."""
        self._flush(tickets)

    def _has_other_work(self) -> bool:
        """With `_cond` held: work besides batches waiting for the thread (calls)."""
        return False

    def _other_work(self) -> None:
        """Run that work between groups."""

    def _flush(self, tickets: list[Ticket]) -> None:
        """Commit a group; if it fails, commit its batches one at a time so only the guilty fail."""
        try:
            self._commit_group(tickets)
        except Exception as exc:
            self.stats.failed_flushes += 1
            if len(tickets) > 1 and self._may_split(exc):
                log.warning(
                    "flush of %d batches failed (%s); retrying them one at a time",
                    len(tickets),
                    exc,
                )
                for ticket in tickets:
                    self._flush([ticket])
                return
            refused = self._may_split(exc) and is_data_error(exc)
            for ticket in tickets:
                if refused:
                    log.error(
                        "batch %s from %r refused: it cannot be stored (%s)",
                        ticket.batch_id,
                        ticket.agent,
                        exc,
                    )
                    self.stats.batches_refused += 1
                    error, status = f"batch {ticket.batch_id} cannot be stored: {exc}", 422
                else:
                    log.exception("flush of batch %s failed; answered 503", ticket.batch_id)
                    error, status = f"{self.committer} could not commit: {exc}", 503
                self._answer(ticket, error=error, status=status)

    def _commit_group(self, tickets: list[Ticket]) -> None:
        """Make the group durable and answer each ticket (`_answer`); raise if nothing landed.
        With an ingest log: append it there; a store without one overrides this."""
        if self._log is None:
            raise NotImplementedError
        self._log_group(self._log, tickets)

    # -- the ingest log: acknowledge on the log, flush in the background -------------------
    def _known_batches(self, batch_ids: list[str]) -> dict[str, tuple[str, str | None]]:
        """The store's ledger entries (table, content digest) for these ids."""
        raise NotImplementedError

    def _flushed_position(self) -> LogPosition:
        """How far the store holds the log's records (recorded by `_store_flush`)."""
        raise NotImplementedError

    def _store_flush(self, records: Sequence[LogRecord], position: LogPosition) -> None:
        """Store these logged batches and `position` atomically, then run the commit hooks;
        raise if nothing was stored. `records` may be empty (the position alone)."""
        raise NotImplementedError

    def flush_log(self) -> None:
        """On the writer thread (a call): store every logged batch now; raises if it could not."""
        if self._pending and not self._flush_log():
            raise IngestError("the ingest log could not be flushed; see the server log", status=503)

    def _ledger_view(self, batch_ids: list[str]) -> dict[str, tuple[str, str | None]]:
        stored = [i for i in batch_ids if i not in self._pending_ids]
        known = self._known_batches(stored) if stored else {}
        for batch_id in batch_ids:
            if batch_id in self._pending_ids:
                known[batch_id] = self._pending_ids[batch_id]
        return known

    def _log_group(self, ingest_log: IngestLog, tickets: list[Ticket]) -> None:
        # id(ticket): (error, status, duplicate); a part's namesake is another ticket
        answers: dict[int, tuple[str | None, int, bool]] = {}
        for ticket in tickets:
            refusal = storable_refusal(ticket.data)
            if refusal is not None:
                answers[id(ticket)] = (f"batch {ticket.batch_id} {refusal}", 422, False)
        known = self._ledger_view([t.batch_id for t in tickets if id(t) not in answers])
        fresh: list[Ticket] = []
        for ticket in tickets:
            if id(ticket) in answers:
                continue
            seen = known.get(ticket.batch_id)
            if seen is None:
                fresh.append(ticket)
                known[ticket.batch_id] = (ticket.table, ticket.digest)  # a part's namesake
            elif same_content(seen, ticket):
                answers[id(ticket)] = (None, 202, True)
            else:
                conflict = conflict_message(ticket.batch_id, seen[0], ticket.table)
                answers[id(ticket)] = (conflict, CONFLICT_STATUS, False)
        fresh_rows = sum(t.rows for t in fresh)
        if fresh and self._pending_rows + fresh_rows > self._queue_max_rows and self._pending:
            self._flush_log()  # the store is behind: catch up before logging more
            if self._pending:
                backlog = (
                    f"the ingest log holds {self._pending_rows} rows the store could not take "
                    "yet; retry later"
                )
                for ticket in fresh:
                    answers[id(ticket)] = (backlog, 503, False)
                fresh = []
        if fresh:
            records = ingest_log.append([log_entry(t) for t in fresh])
            ingest_log.sync()  # raises: nothing of the group is kept, every ticket gets 503
            self.stats.groups_logged += 1
            for record in records:
                self._hold(record)
            if self._pending_rows >= self._flush_rows:
                # A big group (an import, a spool replay) is flushed before it is answered: its
                # sender waits for the store (backpressure), and reads it back at once. Durable
                # in the log either way: a failed flush still answers 202 and is retried.
                self._flush_log()
        refused = sum(1 for _, status, _ in answers.values() if status in (422, CONFLICT_STATUS))
        if refused:
            self.stats.batches_refused += refused
            log.warning("refused %d batches (reused ids with other content, unstorable)", refused)
        self.stats.duplicates += sum(1 for *_, duplicate in answers.values() if duplicate)
        self.stats.batches_committed += len(fresh)
        for ticket in tickets:
            error, status, duplicate = answers.get(id(ticket), (None, 202, False))
            self._answer(ticket, error=error, status=status, duplicate=duplicate)

    def _hold(self, record: LogRecord) -> None:
        entry = record.entry
        if not self._pending:
            self.stats.log_pending_since = time.monotonic()
        self._pending.append(record)
        self._pending_ids[entry.batch_id] = (entry.table, entry.digest)
        self._pending_rows += entry.rows
        self.stats.log_pending_bytes += entry.data.nbytes

    def _keep_pending(self, records: list[LogRecord]) -> None:
        """Only `records` stay logged and unflushed (the rest were stored or quarantined)."""
        self._pending = records
        self._pending_ids = {r.entry.batch_id: ledger_key(r) for r in records}
        self._pending_rows = sum(r.entry.rows for r in records)
        self.stats.log_pending_bytes = sum(r.entry.data.nbytes for r in records)
        if not records:
            self.stats.log_pending_since = None

    @property
    def log_fsyncs(self) -> int:
        """fsync calls the ingest log made (0 without one); read by /metrics."""
        return self._log.fsyncs if self._log is not None else 0

    def oldest_unflushed_ts(self) -> dict[str, datetime]:
        """On the writer thread: per table, the smallest `ts` among logged batches not yet in
        the store (retention must keep those days: warehouse.storage.retention)."""
        oldest: dict[str, datetime] = {}
        for record in self._pending:
            data = record.entry.data
            if data.num_rows == 0 or "ts" not in data.column_names:
                continue
            low = pc.min(data.column("ts")).as_py()
            table = record.entry.table
            if isinstance(low, datetime) and (table not in oldest or low < oldest[table]):
                oldest[table] = low
        return oldest

    def _log_flush_due_at(self) -> float | None:
        """With `_cond` held: when the logged batches must be flushed (None: nothing logged)."""
        if not self._pending:
            return None
        if self._pending_rows >= self._flush_rows:
            return 0.0
        return self._last_log_flush + self._log_flush_interval_s

    def _log_flush_due(self) -> bool:
        due = self._log_flush_due_at()
        return due is not None and time.monotonic() >= due

    def _flush_log(self) -> bool:
        """Store the logged batches; on a data error store them one by one and quarantine the
        guilty; on any other failure keep them logged for the next try. True if all are stored."""
        assert self._log is not None
        self._last_log_flush = time.monotonic()
        records = self._pending
        try:
            self._store_flush(records, records[-1].end)
        except Exception as exc:
            self.stats.failed_flushes += 1
            if not (self._may_split(exc) and is_data_error(exc)):
                log.exception(
                    "flush of %d logged batches failed; they stay in the ingest log, retried in "
                    "%.1f s",
                    len(records),
                    self._log_flush_interval_s,
                )
                return False
            log.warning("flush of %d logged batches failed (%s); one at a time", len(records), exc)
            if not self._store_one_by_one(self._log, records):
                return False
        self._keep_pending([])
        try:
            self._log.roll()
            self._log.drop_before(self._log.position.segment)
        except OSError:
            log.exception("could not start a new ingest log segment; the flushed ones stay")
        return True

    def _store_one_by_one(self, ingest_log: IngestLog, records: list[LogRecord]) -> bool:
        last_stored = True
        for at, record in enumerate(records):
            try:
                self._store_flush([record], record.end)
            except Exception as exc:
                kept = None
                if self._may_split(exc) and is_data_error(exc):
                    try:
                        kept = ingest_log.keep_refused(record)
                    except OSError:
                        log.exception("could not quarantine logged batch %s", record.entry.batch_id)
                if kept is None:
                    log.exception("flush of logged batch %s failed", record.entry.batch_id)
                    self._keep_pending(records[at:])
                    return False
                last_stored = False
                self.stats.batches_quarantined += 1
                log.error(
                    "logged batch %s from %r (%d rows) cannot be stored (%s); kept in %s",
                    record.entry.batch_id,
                    record.entry.agent,
                    record.entry.rows,
                    exc,
                    kept,
                )
            else:
                last_stored = True
        if not last_stored:
            try:
                self._store_flush([], records[-1].end)  # the position past the quarantined one
            except Exception:
                # Not recorded: the next start replays the quarantined record again (kept
                # twice, never lost); the stored ones are skipped by the ledger.
                log.exception("could not record the ingest log position past a quarantined batch")
        return True

    def _replay_log(self, ingest_log: IngestLog) -> None:
        """Before the thread starts: hold the records the store lacks, start a new segment."""
        records = ingest_log.replay(self._flushed_position())
        known = self._known_batches([r.entry.batch_id for r in records]) if records else {}
        stored = 0
        for record in records:
            if record.entry.batch_id in known or record.entry.batch_id in self._pending_ids:
                stored += 1  # flushed, but the position was not recorded (an older build)
            else:
                self._hold(record)
        ingest_log.roll()
        if not self._pending:
            ingest_log.drop_before(ingest_log.position.segment)
        if records:
            log.warning(
                "replayed %d acknowledged batches (%d rows) from the ingest log; %d were stored",
                len(self._pending),
                self._pending_rows,
                stored,
            )

    def _may_split(self, exc: BaseException) -> bool:
        """Whether a failed group is still whole (nothing of it landed): retry it batch by batch,
        and a single batch's data error is its own fault."""
        return True

    def _answer(
        self,
        ticket: Ticket,
        *,
        duplicate: bool = False,
        error: str | None = None,
        status: int = 202,
    ) -> None:
        with self._cond:
            if self._inflight.get(ticket.batch_id) is ticket:  # not a part's namesake
                del self._inflight[ticket.batch_id]
            ticket._resolve(duplicate=duplicate, error=error, status=status)

    def _answer_parts(self, ticket: Ticket) -> None:
        """A ticket of several parts is answered once every part is: 503 if one must be retried
        (the parts already stored come back as duplicates then), its parts' answers kept."""
        retry = [child for child in ticket.children if child.status >= 500]
        if retry:
            self._answer(ticket, error=retry[0].error, status=retry[0].status)
        else:
            self._answer(ticket)

    def _run_hooks(self, commit: Commit) -> None:
        """The commit hooks on rows already durable: a hook's failure is logged, never the flush's."""
        for hook in self._hooks:
            try:
                hook(commit)
            except Exception:
                log.exception("commit hook %r failed for flush %d", hook, commit.seq)

    def _account(
        self, rows: Mapping[str, int], batches: int, duplicates: int, started: float
    ) -> None:
        stats = self.stats
        stats.flushes += 1
        stats.batches_committed += batches
        stats.duplicates += duplicates
        for name, count in rows.items():
            stats.rows_committed[name] = stats.rows_committed.get(name, 0) + count
        stats.last_flush_rows = sum(rows.values())
        stats.last_flush_s = time.perf_counter() - started
