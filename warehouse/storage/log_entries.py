"""Between the writer's tickets and the ingest log's entries (issue 27): a ticket as the entry
the log keeps, logged entries as the tickets the commit hooks read, and the ledger-content rule.

Why apart from warehouse.storage.group_writer: these are pure conversions and checks, with no thread and
no store; the group writer calls them on its thread. `storable_refusal` is here because a logged
batch is already acknowledged: what the store could never hold must be refused before the log.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from warehouse.ingest.batch_queue import Ticket
from warehouse.storage.ingest_log import LogEntry, LogRecord

__all__ = [
    "is_data_error",
    "ledger_key",
    "log_entry",
    "record_tickets",
    "same_content",
    "storable_refusal",
]


def log_entry(ticket: Ticket) -> LogEntry:
    return LogEntry(
        batch_id=ticket.batch_id,
        table=ticket.table,
        rows=ticket.rows,
        agent=ticket.agent,
        agent_version=ticket.agent_version,
        digest=ticket.digest,
        received_at=ticket.received_at,
        data=ticket.data,
    )


def ledger_key(record: LogRecord) -> tuple[str, str]:
    return (record.entry.table, record.entry.digest)


def record_tickets(records: Sequence[LogRecord]) -> list[Ticket]:
    """The logged batches as (answered) tickets, for the commit hooks' `Commit.tickets`."""
    tickets = []
    for record in records:
        e = record.entry
        ticket = Ticket(
            e.batch_id, e.table, e.rows, e.agent, e.data.slice(0, 0), e.received_at,
            e.agent_version, e.digest,
        )  # fmt: skip
        ticket._done.set()
        tickets.append(ticket)
    return tickets


def same_content(stored: tuple[str, str | None], ticket: Ticket) -> bool:
    """Whether a ledger entry is this ticket's batch: same table and digest (an entry written
    before digests existed has none, and is taken for the same batch, the old rule)."""
    table, digest = stored
    return table == ticket.table and (digest is None or digest == ticket.digest)


def storable_refusal(data: pa.Table) -> str | None:
    """Why the store could never hold these rows, checked before the ack (a logged batch is
    acknowledged): a timestamp beyond the microsecond range DuckDB and Iceberg keep (issue 12's
    poison). None if storable. Cost: one cast per coarse timestamp column."""
    for name, column in zip(data.column_names, data.columns, strict=True):
        kind = column.type
        if pa.types.is_timestamp(kind) and kind.unit in ("s", "ms"):
            try:
                pc.cast(column, pa.timestamp("us", kind.tz), safe=True)
            except pa.ArrowInvalid as exc:
                return f"cannot be stored: column {name} holds a time out of range ({exc})"
    return None


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
