"""The fleet-mode batch-id ledger: which gateway holds, or has committed, each agent batch.

Why in the catalog: with many stateless gateways, a retry of a batch can land on another gateway
than the first copy; only a shared, transactional ledger can answer it `duplicate: true`. The
rows live in the same PostgreSQL database as the Iceberg SQL catalog.

Protocol (warehouse.fleet.writer drives it): a gateway *claims* each batch id of a flush under
its own flush id (`INSERT ... ON CONFLICT DO NOTHING`), appends the rows to the Iceberg table
with the flush id in the snapshot summary, then marks its claims committed. A claim older than
the lease whose flush id is not in any snapshot belonged to a gateway that died before its
commit: another gateway may `take_over` it. If the flush id IS in a snapshot, the gateway died
after its Iceberg commit and before marking: the batch is stored, so the answer is duplicate.
Each claim carries the batch's content digest (warehouse.ingest.batch_digest): a claim of an id the ledger
holds for another table or with another digest is a `conflict` (409, issue 28), never a duplicate.
This module must never hold telemetry rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

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

Verdict = Literal["mine", "committed", "busy", "stale", "conflict"]


@dataclass(frozen=True)
class Entry:
    batch_id: str
    table_name: str
    rows: int
    agent: str
    digest: str = ""


@dataclass(frozen=True)
class Claim:
    """What the ledger says about one batch id after a claim: `stale` carries the dead owner."""

    verdict: Verdict
    owner: str = ""


def claim(
    conn: Connection, entries: Sequence[Entry], flush_id: str, now: datetime, lease_s: float
) -> dict[str, Claim]:
    """Claim every batch id not yet in the ledger for `flush_id`; classify the others."""
    if not entries:
        return {}
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    values = [
        {
            "batch_id": e.batch_id,
            "table_name": e.table_name,
            "rows": e.rows,
            "agent": e.agent[:255],
            "flush_id": flush_id,
            "state": PENDING,
            "claimed_at": now,
            "digest": e.digest or None,
        }
        for e in entries
    ]
    conn.execute(dialect.insert(ingest_ledger).values(values).on_conflict_do_nothing())
    ids = [e.batch_id for e in entries]
    rows = conn.execute(
        select(
            ingest_ledger.c.batch_id,
            ingest_ledger.c.flush_id,
            ingest_ledger.c.state,
            ingest_ledger.c.claimed_at,
            ingest_ledger.c.table_name,
            ingest_ledger.c.digest,
        ).where(ingest_ledger.c.batch_id.in_(ids))
    ).all()
    expiry = now - timedelta(seconds=lease_s)
    wanted = {e.batch_id: e for e in entries}
    out: dict[str, Claim] = {}
    for batch_id, owner, state, claimed_at, table_name, digest in rows:
        entry = wanted[batch_id]
        if table_name != entry.table_name or digest not in (None, entry.digest or None):
            out[batch_id] = Claim("conflict", table_name)
        elif owner == flush_id and state == PENDING:
            out[batch_id] = Claim("mine")
        elif state == COMMITTED:
            out[batch_id] = Claim("committed")
        elif claimed_at > expiry:
            out[batch_id] = Claim("busy", owner)
        else:
            out[batch_id] = Claim("stale", owner)
    return out


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


def holders(conn: Connection, batch_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
    """batch id -> (flush id, state) the ledger holds now (ids it does not hold are absent)."""
    if not batch_ids:
        return {}
    rows = conn.execute(
        select(ingest_ledger.c.batch_id, ingest_ledger.c.flush_id, ingest_ledger.c.state).where(
            ingest_ledger.c.batch_id.in_(list(batch_ids))
        )
    ).all()
    return {str(b): (str(f), str(s)) for b, f, s in rows}


def renew(conn: Connection, flush_id: str, now: datetime) -> int:
    """Claim the pending batches of `flush_id` afresh at `now` (a lease heartbeat)."""
    result = conn.execute(
        update(ingest_ledger)
        .where(ingest_ledger.c.flush_id == flush_id, ingest_ledger.c.state == PENDING)
        .values(claimed_at=now)
    )
    return result.rowcount


def take_over(conn: Connection, batch_id: str, old: str, flush_id: str, now: datetime) -> bool:
    """Move a stale claim to `flush_id`; False when someone else moved or committed it first."""
    result = conn.execute(
        update(ingest_ledger)
        .where(
            ingest_ledger.c.batch_id == batch_id,
            ingest_ledger.c.flush_id == old,
            ingest_ledger.c.state == PENDING,
        )
        .values(flush_id=flush_id, claimed_at=now)
    )
    return result.rowcount == 1


def mark_committed(conn: Connection, flush_id: str, now: datetime) -> int:
    """Every claim of `flush_id` is stored: later copies are duplicates."""
    result = conn.execute(
        update(ingest_ledger)
        .where(ingest_ledger.c.flush_id == flush_id)
        .values(state=COMMITTED, committed_at=now)
    )
    return result.rowcount


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


def release(
    conn: Connection,
    flush_id: str,
    handed_back: Mapping[str, str] | None = None,
    expired_at: datetime | None = None,
) -> None:
    """Drop the pending claims of a flush that did not commit, so a retry need not wait.

    A claim the flush took over (`handed_back`: batch id -> the flush it was taken from) goes back
    to that flush, claimed at `expired_at` (stale at once), instead: the old flush may belong to a
    gateway that is slow, not dead, and still land, and only its id in the snapshots tells the
    next claimer so (dropped, a later copy was stored again: the fleet end-to-end test, issue 30)."""
    for batch_id, old in (handed_back or {}).items():
        conn.execute(
            update(ingest_ledger)
            .where(
                ingest_ledger.c.batch_id == batch_id,
                ingest_ledger.c.flush_id == flush_id,
                ingest_ledger.c.state == PENDING,
            )
            .values(flush_id=old, claimed_at=expired_at)
        )
    conn.execute(
        delete(ingest_ledger).where(
            ingest_ledger.c.flush_id == flush_id, ingest_ledger.c.state == PENDING
        )
    )


def prune(conn: Connection, before: datetime) -> int:
    """Forget every batch id claimed before `before`; returns how many.

    Why it is safe past the raw-retention cutoff (the embedded writer's rule, warehouse.storage.retention):
    a batch's samples are older than its claim, so by then raw retention has dropped them, and a
    copy sent again duplicates nothing that is stored. Pending claims that old go too: their
    gateway died days ago, and whether its rows landed no longer matters for the same reason.
    """
    result = conn.execute(delete(ingest_ledger).where(ingest_ledger.c.claimed_at < before))
    return result.rowcount
