"""The fleet-mode batch-id ledger: which batches the fleet has stored, shared by every gateway.

Why in the catalog: with many gateways, a retry of a batch can land on another gateway than the
first copy; only a shared, transactional ledger can answer it `duplicate: true`. The rows live
in the same PostgreSQL database as the Iceberg SQL catalog.

Protocol (warehouse.fleet.writer drives it, issue 27): a gateway acknowledges a batch on its own
ingest log after checking the ledger (`known`: duplicate or 409); its background flush inserts
the batches' rows here as stored (`record_stored`) in the same transaction that stages their
data files (warehouse.catalog.staging), so an id is in the ledger exactly when its rows are
staged, and a copy another gateway staged first is dropped from the later flush. Each entry
carries the batch's content digest (warehouse.ingest.batch_digest): a copy of an id the ledger
holds for another table or with another digest is a conflict (409, issue 28), never a duplicate.
`pending` entries are what gateways of an older build left (they claimed ids before their own
Iceberg commit): `settle` marks those whose commit a snapshot carries, and they read as stored.
This module must never hold telemetry rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Column, Connection, Integer, String, Table, delete, select, update
from sqlalchemy.dialects import postgresql, sqlite

from warehouse.catalog.base import UTCDateTime, metadata

ingest_ledger = Table(
    "ingest_ledger",
    metadata,
    Column("batch_id", String(64), primary_key=True),
    Column("table_name", String(64), nullable=False),
    Column("rows", Integer, nullable=False),
    Column("agent", String(255), nullable=False),
    Column("flush_id", String(32), nullable=False, index=True),
    Column("state", String(16), nullable=False),  # pending | committed
    Column("claimed_at", UTCDateTime, nullable=False, index=True),  # prune deletes by it
    Column("committed_at", UTCDateTime),
    Column("digest", String(32)),  # null: claimed before digests existed (taken as the same batch)
    info={"added_columns": ("digest",)},  # added to an older catalog on connect (catalog.base)
)

PENDING = "pending"
COMMITTED = "committed"


@dataclass(frozen=True)
class Entry:
    batch_id: str
    table_name: str
    rows: int
    agent: str
    digest: str = ""


def record_stored(
    conn: Connection, entries: Sequence[Entry], flush_id: str, now: datetime
) -> set[str]:
    """Record `entries` as stored (committed) by `flush_id`; returns the ids this call inserted.
    An id already in the ledger (another gateway staged a retry of it first) is left as it is:
    the caller drops its copy. Called in the transaction that stages the batches' data files, so
    a batch is in the ledger exactly when its rows are staged (warehouse.fleet.writer)."""
    if not entries:
        return set()
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    values = [
        {
            "batch_id": e.batch_id,
            "table_name": e.table_name,
            "rows": e.rows,
            "agent": e.agent[:255],
            "flush_id": flush_id,
            "state": COMMITTED,
            "claimed_at": now,
            "committed_at": now,
            "digest": e.digest or None,
        }
        for e in entries
    ]
    inserted = conn.execute(
        dialect.insert(ingest_ledger)
        .values(values)
        .on_conflict_do_nothing()
        .returning(ingest_ledger.c.batch_id)
    )
    return {str(r[0]) for r in inserted}


def known(conn: Connection, batch_ids: Sequence[str]) -> dict[str, tuple[str, str | None]]:
    """batch id -> (table, content digest) for the ids the ledger holds (any state)."""
    found: dict[str, tuple[str, str | None]] = {}
    for at in range(0, len(batch_ids), 1000):
        rows = conn.execute(
            select(
                ingest_ledger.c.batch_id, ingest_ledger.c.table_name, ingest_ledger.c.digest
            ).where(ingest_ledger.c.batch_id.in_(list(batch_ids[at : at + 1000])))
        ).all()
        found.update((str(b), (str(t), d)) for b, t, d in rows)
    return found


def settle(conn: Connection, flush_ids: Sequence[str], now: datetime) -> int:
    """Mark committed the pending claims of flushes whose commit is in the table; returns how many.

    Why: a gateway that died between its Iceberg commit and `mark_committed` leaves its claims
    pending, and a retry learns the rows landed only from the flush id in a snapshot summary.
    Snapshot expiry forgets those summaries, so it settles their claims first; else a copy sent
    after the expiry would be taken over and stored twice.
    """
    settled = 0
    for i in range(0, len(flush_ids), 1000):  # bounded IN lists
        result = conn.execute(
            update(ingest_ledger)
            .where(
                ingest_ledger.c.flush_id.in_(flush_ids[i : i + 1000]),
                ingest_ledger.c.state == PENDING,
            )
            .values(state=COMMITTED, committed_at=now)
        )
        settled += result.rowcount
    return settled


def prune(conn: Connection, before: datetime) -> int:
    """Forget every batch id claimed before `before`; returns how many.

    Why it is safe past the raw-retention cutoff (the embedded writer's rule, warehouse.storage.retention):
    a batch's samples are older than its claim, so by then raw retention has dropped them, and a
    copy sent again duplicates nothing that is stored. Pending claims that old go too: their
    gateway died days ago, and whether its rows landed no longer matters for the same reason.
    """
    result = conn.execute(delete(ingest_ledger).where(ingest_ledger.c.claimed_at < before))
    return result.rowcount
