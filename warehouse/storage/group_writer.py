"""The one writer thread both modes run: take a group of queued batches, commit it through the
mode's store, isolate a poison batch, run the commit hooks, answer every ticket.

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

import duckdb
import pyarrow as pa

from warehouse.ingest.batch_queue import BatchQueue, Ticket
from warehouse.ingest.shape_limits import UNLIMITED, ShapeLimits

log = logging.getLogger(__name__)

__all__ = ["Commit", "CommitHook", "GroupWriter", "WriterStats", "is_data_error"]


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


class GroupWriter(BatchQueue):
    """A BatchQueue drained by one thread that commits groups; see the module docstring."""

    def __init__(
        self,
        *,
        owner: str,
        queue_name: str,
        committer: str,
        thread_name: str,
        flush_rows: int,
        flush_interval_s: float,
        flush_idle_s: float,
        queue_max_rows: int,
        hooks: Sequence[CommitHook],
        shape_limits: ShapeLimits = UNLIMITED,
    ) -> None:
        super().__init__(
            owner=owner,
            queue_name=queue_name,
            flush_rows=flush_rows,
            flush_interval_s=flush_interval_s,
            flush_idle_s=flush_idle_s,
            queue_max_rows=queue_max_rows,
            shape_limits=shape_limits,
        )
        self._committer = committer  # who "could not commit" in a 503's message
        self._thread_name = thread_name
        self._hooks = list(hooks)
        self._thread: threading.Thread | None = None
        self.stats = WriterStats()

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        self._prepare()
        self._thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
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
                batch = self._take_group(self._has_other_work)
                done = self._stopping and not batch and not self._has_other_work()
            if batch:
                expanded = [part for ticket in batch for part in _expand(ticket)]
                self._commit_groups(expanded)
                for ticket in batch:
                    if ticket.parts:
                        self._answer_parts(ticket)
            self._other_work()
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
                    error, status = f"{self._committer} could not commit: {exc}", 503
                self._answer(ticket, error=error, status=status)

    def _commit_group(self, tickets: list[Ticket]) -> None:
        """Make the group durable and answer each ticket (`_answer`); raise if nothing landed."""
        raise NotImplementedError

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


def _expand(ticket: Ticket) -> list[Ticket]:
    """A ticket of several parts as one ticket per part (its `children`), so deduplication,
    conflicts and poison isolation work part by part in every writer."""
    if not ticket.parts:
        return [ticket]
    ticket.children = [
        Ticket(
            part.batch_id,
            ticket.table,
            part.rows,
            ticket.agent,
            ticket.data.slice(part.offset, part.rows),
            ticket.received_at,
            ticket.agent_version,
            part.digest,
        )
        for part in ticket.parts
    ]
    return ticket.children


def is_data_error(exc: BaseException) -> bool:
    """Whether a batch failed because of what it holds (never retry it), not the machine."""
    return isinstance(
        exc,
        (
            duckdb.DataError,
            duckdb.IntegrityError,
            pa.ArrowException,
            ArithmeticError,
            ValueError,
            TypeError,
        ),
    ) and not isinstance(exc, (duckdb.IOException, OSError))
