"""The request side both writers share: batches queued by request threads, taken in groups by the
one writer thread (the embedded `warehouse.storage.writer.Writer` and the fleet gateway's
`warehouse.fleet.writer.FleetWriter`).

Why one class: backpressure (503 once `queue_max_rows` wait), the in-flight dedup of a retried
batch id and the group wait (flush at `flush_rows`, after `flush_idle_s` without arrivals or at
`flush_interval_s`, whichever first) are the ingest contract of issue 12; two copies drift.
Before a batch is queued, on the request's thread, its shape is checked against the per-request
limits (`warehouse.ingest.shape_limits`: 413 naming the limit) and its content digest computed
(`warehouse.ingest.batch_digest`): a retry joining a copy still in flight must carry the same content
and table, else 409. Subclasses keep `_cond` held while touching these fields, compare the digest
with their ledger's, and drop a batch id from `_inflight` once its ticket is resolved. Never does
I/O.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pyarrow as pa

from fleetscope.errors import IngestError
from warehouse.ingest.batch_digest import CONFLICT_STATUS, conflict_message, content_digest
from warehouse.ingest.shape_limits import SHAPE_STATUS, UNLIMITED, ShapeLimits, shape_refusal

__all__ = ["BatchQueue", "Part", "Ticket", "expand_parts"]


@dataclass(frozen=True)
class Part:
    """One ledger batch inside a ticket that carries several (`BatchQueue.submit_parts`): its
    rows are `rows` rows of the ticket's data from `offset`, deduplicated under its own id."""

    batch_id: str
    offset: int
    rows: int
    digest: str


@dataclass
class Ticket:
    """A submitted batch; `wait` returns once it is committed (or refused with `error`)."""

    batch_id: str
    table: str
    rows: int
    agent: str
    data: pa.Table
    received_at: datetime
    agent_version: str = ""
    digest: str = ""  # batch_digest.content_digest: a reused id must carry the same content
    duplicate: bool = False
    error: str | None = None
    status: int = 202  # 503: retry later with the same id; 422: this batch can never be stored
    parts: tuple[Part, ...] = ()  # several ledger batches in one ticket; see submit_parts
    children: list[Ticket] = field(default_factory=list)  # the parts' own answers, once done
    _done: threading.Event = field(default_factory=threading.Event)

    def wait(self, timeout_s: float) -> bool:
        return self._done.wait(timeout_s)

    @property
    def conflicted(self) -> bool:
        """Refused because its batch id was already stored with other content (409)."""
        return self.status == CONFLICT_STATUS

    def _resolve(
        self, *, duplicate: bool = False, error: str | None = None, status: int = 202
    ) -> None:
        self.duplicate = duplicate
        self.error = error
        self.status = status
        self.data = self.data.slice(0, 0)  # free the rows; the ticket may outlive the flush
        self._done.set()


class BatchQueue:
    """Tickets waiting for the writer thread; `owner` and `queue_name` word its 503 messages
    ("server is shutting down", "ingest queue is full")."""

    def __init__(
        self,
        *,
        owner: str,
        queue_name: str,
        flush_rows: int,
        flush_interval_s: float,
        flush_idle_s: float,
        queue_max_rows: int,
        shape_limits: ShapeLimits = UNLIMITED,
    ) -> None:
        self._owner = owner
        self._shape_limits = shape_limits
        self._queue_name = queue_name
        self._flush_rows = flush_rows
        self._flush_interval_s = flush_interval_s
        self._flush_idle_s = flush_idle_s
        self._queue_max_rows = queue_max_rows
        self._cond = threading.Condition()
        self._queue: deque[Ticket] = deque()
        self._queued_rows = 0
        self._last_arrival = 0.0
        self._inflight: dict[str, Ticket] = {}
        self._stopping = False

    @property
    def queued_rows(self) -> int:
        return self._queued_rows

    def submit(
        self, table: str, data: pa.Table, batch_id: str, agent: str = "", agent_version: str = ""
    ) -> tuple[Ticket, bool]:
        """Queue a conformed batch; returns its ticket and whether it was already in flight.

        Raises IngestError(503) while stopping or when the queue holds `queue_max_rows` rows:
        the agent keeps the batch and retries later with the same id. A batch over a shape limit,
        or reusing the id of a batch in flight with other content, comes back as a ticket already
        refused (413, 409): never queued, so it costs the writer nothing.
        """
        received_at = datetime.now(UTC)
        refusal = shape_refusal(data, self._shape_limits)
        if refusal is not None:
            return _refused(table, data, batch_id, agent, refusal, SHAPE_STATUS), False
        digest = content_digest(table, data)
        # One chunk per column from here on: the writer's concat, DuckDB's insert and the Parquet
        # writer each pay per chunk, and 5,000 one-row record batches held the writer 25 s
        # (issue 27). The copy is bounded by the batch's bytes and made on the request's thread.
        data = data.combine_chunks()
        with self._cond:
            if self._stopping:
                raise IngestError(f"{self._owner} is shutting down; retry later", status=503)
            existing = self._inflight.get(batch_id)
            if existing is not None and (existing.table, existing.digest) != (table, digest):
                error = conflict_message(batch_id, existing.table, table)
                return _refused(table, data, batch_id, agent, error, CONFLICT_STATUS), False
            if existing is not None:
                return existing, True
            ticket = Ticket(
                batch_id, table, data.num_rows, agent, data, received_at, agent_version, digest
            )
            self._enqueue_locked(ticket)
            return ticket, False

    def submit_parts(
        self, table: str, data: pa.Table, parts: tuple[Part, ...], agent: str = ""
    ) -> tuple[Ticket, bool]:
        """Queue rows that are several ledger batches as ONE ticket: one queue entry, one wait.

        Why: a remote_write request that completes a thousand scrapes would otherwise queue a
        thousand tickets, each paying its own digest, copy and answer (issue 28 wants an answer
        within 2 s). Each part keeps its own batch id and digest, so the writer deduplicates
        and refuses (409) part by part exactly as for separate batches; its answer is in
        `Ticket.children`, in `parts` order. The ticket's own id names the set of parts (a
        retry of the same parts joins it while in flight); it never enters a ledger.
        """
        if sum(part.rows for part in parts) != data.num_rows:
            raise ValueError("the parts must cover the rows exactly")
        joined = hashlib.sha256("\n".join(p.batch_id for p in parts).encode()).hexdigest()
        digest = hashlib.sha256("\n".join(p.digest for p in parts).encode()).hexdigest()
        data = data.combine_chunks()
        with self._cond:
            if self._stopping:
                raise IngestError(f"{self._owner} is shutting down; retry later", status=503)
            batch_id = f"parts-{joined[:40]}"
            existing = self._inflight.get(batch_id)
            if existing is not None:
                return existing, True
            ticket = Ticket(
                batch_id, table, data.num_rows, agent, data, datetime.now(UTC), "", digest[:32]
            )
            ticket.parts = parts
            self._enqueue_locked(ticket)
            return ticket, False

    def _enqueue_locked(self, ticket: Ticket) -> None:
        """Queue a new ticket, or refuse it when the queue is full (503); the caller holds the lock."""
        if self._queue and self._queued_rows + ticket.rows > self._queue_max_rows:
            raise IngestError(
                f"{self._queue_name} queue is full ({self._queued_rows} rows waiting); retry later",
                status=503,
            )
        self._inflight[ticket.batch_id] = ticket
        self._queue.append(ticket)
        self._queued_rows += ticket.rows
        self._last_arrival = time.monotonic()
        # The writer re-reads `_last_arrival` when its idle wait ends: wake it only when a group
        # starts or fills.
        if self._queued_rows >= self._flush_rows or len(self._queue) == 1:
            self._cond.notify_all()

    def _take_group(
        self, other_work: Callable[[], bool] = lambda: False, wake_at: float | None = None
    ) -> list[Ticket]:
        """With `_cond` held: wait for a batch (or `other_work`, or stopping, or the monotonic
        `wake_at`: the ingest log's next flush), then for its group to fill or go quiet; return
        the queued tickets and empty the queue."""
        while not self._queue and not other_work() and not self._stopping:
            if wake_at is None:
                self._cond.wait()
                continue
            remaining = wake_at - time.monotonic()
            if remaining <= 0:
                return []
            self._cond.wait(remaining)
        if self._queue and not self._stopping:
            deadline = time.monotonic() + self._flush_interval_s
            while self._queued_rows < self._flush_rows and not self._stopping:
                quiet_until = self._last_arrival + self._flush_idle_s
                remaining = min(deadline, quiet_until) - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
        batch = list(self._queue)
        self._queue.clear()
        self._queued_rows = 0
        return batch


def _refused(
    table: str, data: pa.Table, batch_id: str, agent: str, error: str, status: int
) -> Ticket:
    """A ticket answered before it was queued: the request path reads it like any other."""
    ticket = Ticket(batch_id, table, data.num_rows, agent, data, datetime.now(UTC))
    ticket._resolve(error=error, status=status)
    return ticket


def expand_parts(ticket: Ticket) -> list[Ticket]:
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
