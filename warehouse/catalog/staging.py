"""Fleet mode's staged data files: Parquet files gateways wrote, waiting for the table's committer.

Why: every gateway appending to an Iceberg table on its own raced the others for the table's
metadata pointer (140 commit-conflict retries in 8 minutes with 2 gateways, a commit given up
with 3; issue 27). Now a gateway's background flush writes its logged batches as data files to
the object store and records each one here, in the same PostgreSQL transaction as the batches'
ledger entries; exactly one committer per table (warehouse.fleet.committer) appends every staged
file of every gateway in one Iceberg commit every few seconds.

A row's life: staged (commit_id and committed_at null) -> assigned to one commit (commit_id set,
in its own transaction before the Iceberg commit) -> committed (committed_at set, after the
Iceberg commit whose snapshot summary carries the commit id). A committer that died between the
Iceberg commit and the marking leaves rows assigned and not committed: the next committer looks
for the commit id in the table's snapshots and marks them committed (found) or unassigns them
(not found), so a takeover never commits a file twice. Readers read the files not yet in their
snapshot from here (warehouse.fleet.reader): a committed file carries its snapshot's sequence
number, which only grows, so a reader tells a file committed after its snapshot from one whose
snapshot has since expired. This module must never hold telemetry rows.

Before it assigns, the committer merges each partition's staged files into one
(warehouse.fleet.merge): `mergeable` lists them, `replace` swaps their rows for the merged
file's in one transaction, so a reader's listing holds either the small files or the merged
one, never both. The small files stay in the store (a reader may be reading them) until the
orphan sweep, which never deletes a file not committed yet (`uncommitted`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Integer,
    String,
    Table,
    and_,
    delete,
    func,
    insert,
    or_,
    select,
    update,
)

from warehouse.catalog.base import UTCDateTime, metadata

staged_files = Table(
    "ingest_staged_files",
    metadata,
    Column("path", String(1024), primary_key=True),
    Column("table_name", String(64), nullable=False, index=True),
    Column("rows", BigInteger, nullable=False),
    Column("file_bytes", BigInteger, nullable=False),
    Column("partition", String(512), nullable=False),  # e.g. ts_day=2026-11-28/cluster=east
    Column("min_ts", UTCDateTime, nullable=False),  # the file's time range (readers prune by it)
    Column("max_ts", UTCDateTime, nullable=False),
    Column("gateway", String(255), nullable=False),
    Column("staged_at", UTCDateTime, nullable=False, server_default=func.now()),
    Column("commit_id", String(32), index=True),  # the commit it was assigned to
    Column("committed_at", UTCDateTime, index=True),
    Column("snapshot_id", BigInteger),  # the Iceberg snapshot that added it
    Column("sequence_number", BigInteger),  # that snapshot's (readers compare theirs with it)
    Column("attempts", Integer, nullable=False, server_default="0"),
)


@dataclass(frozen=True)
class StagedFile:
    path: str
    table_name: str
    rows: int
    file_bytes: int
    partition: str
    min_ts: datetime
    max_ts: datetime
    gateway: str


def stage(conn: Connection, files: Sequence[StagedFile]) -> None:
    """Record written data files (in the transaction of their batches' ledger entries)."""
    if files:
        conn.execute(insert(staged_files), [vars(f) for f in files])


def mergeable(conn: Connection, table_name: str) -> dict[str, list[StagedFile]]:
    """The staged (unassigned) files of `table_name` per partition, oldest first."""
    c = staged_files.c
    rows = conn.execute(
        select(c.path, c.rows, c.file_bytes, c.partition, c.min_ts, c.max_ts, c.gateway)
        .where(c.table_name == table_name, c.commit_id.is_(None), c.committed_at.is_(None))
        .order_by(c.staged_at, c.path)
    )
    out: dict[str, list[StagedFile]] = {}
    for path, n, size, partition, min_ts, max_ts, gateway in rows:
        staged = StagedFile(path, table_name, n, size, partition, min_ts, max_ts, gateway)
        out.setdefault(partition, []).append(staged)
    return out


def replace(conn: Connection, old: Sequence[str], new: Sequence[StagedFile]) -> bool:
    """Swap the staged rows at paths `old` for `new` (a merge of them), in the caller's
    transaction; False, changing nothing, when any of `old` is no longer staged (assigned or
    committed meanwhile: `new` is then an orphan for the sweep)."""
    c = staged_files.c
    locked = conn.execute(
        select(c.path)
        .where(c.path.in_(list(old)), c.commit_id.is_(None), c.committed_at.is_(None))
        .with_for_update()
    ).all()
    if len(locked) != len(set(old)):
        return False
    conn.execute(delete(staged_files).where(c.path.in_(list(old))))
    stage(conn, new)
    return True


def uncommitted(conn: Connection, table_name: str) -> set[str]:
    """The paths of `table_name`'s files not committed yet (staged or assigned): no metadata
    reaches them, readers read them, and the orphan sweep must keep them."""
    c = staged_files.c
    query = select(c.path).where(c.table_name == table_name, c.committed_at.is_(None))
    return {str(p) for (p,) in conn.execute(query)}


def assign(
    conn: Connection,
    table_name: str,
    commit_id: str,
    limit: int,
    among: Sequence[str] | None = None,
) -> list[str]:
    """The staged files of `table_name` (oldest first, at most `limit`; only those at paths
    `among` when given) now assigned to `commit_id`; call in a transaction of its own,
    committed before the Iceberg commit."""
    c = staged_files.c
    query = select(c.path).where(
        c.table_name == table_name, c.commit_id.is_(None), c.committed_at.is_(None)
    )
    if among is not None:
        query = query.where(c.path.in_(list(among)))
    paths = [
        str(p)
        for (p,) in conn.execute(
            query.order_by(c.staged_at, c.path).limit(limit).with_for_update(skip_locked=True)
        )
    ]
    if paths:
        conn.execute(
            update(staged_files)
            .where(c.path.in_(paths))
            .values(commit_id=commit_id, attempts=c.attempts + 1)
        )
    return paths


def unfinished(conn: Connection, table_name: str) -> list[str]:
    """Commit ids assigned and never marked (a committer died, or its commit failed)."""
    c = staged_files.c
    rows = conn.execute(
        select(c.commit_id)
        .where(c.table_name == table_name, c.commit_id.is_not(None), c.committed_at.is_(None))
        .distinct()
    )
    return [str(r[0]) for r in rows]


def mark_committed(conn: Connection, commit_id: str, snapshot_id: int, sequence_number: int) -> int:
    c = staged_files.c
    result = conn.execute(
        update(staged_files)
        .where(c.commit_id == commit_id, c.committed_at.is_(None))
        .values(committed_at=func.now(), snapshot_id=snapshot_id, sequence_number=sequence_number)
    )
    return result.rowcount


def settle(conn: Connection, commit_ids: Sequence[str]) -> int:
    """Mark committed the files of these commits (their snapshots are about to expire: the
    summary is the only proof a dead committer's append landed)."""
    c = staged_files.c
    settled = 0
    for at in range(0, len(commit_ids), 1000):
        result = conn.execute(
            update(staged_files)
            .where(c.commit_id.in_(list(commit_ids[at : at + 1000])), c.committed_at.is_(None))
            .values(committed_at=func.now())
        )
        settled += result.rowcount
    return settled


def unassign(conn: Connection, commit_id: str) -> int:
    """Hand the files of a commit that did not land back to the next one."""
    c = staged_files.c
    result = conn.execute(
        update(staged_files)
        .where(c.commit_id == commit_id, c.committed_at.is_(None))
        .values(commit_id=None)
    )
    return result.rowcount


def readable(
    conn: Connection,
    table_name: str,
    start: datetime,
    end: datetime,
    in_snapshots: set[str],
    sequence_number: int,
    recent_s: float = 300.0,
) -> list[str]:
    """Paths of the files of `table_name` overlapping [start, end) that a reader's snapshot
    (its `sequence_number`; `in_snapshots`: the commit ids its metadata's snapshots carry) does
    not hold: not committed and not in those snapshots (an append landed, not marked yet), or
    committed by a snapshot newer than the reader's (in the last `recent_s` seconds)."""
    c = staged_files.c
    since = func.now() - timedelta(seconds=recent_s)
    rows = conn.execute(
        select(c.path, c.commit_id, c.committed_at, c.sequence_number).where(
            c.table_name == table_name,
            c.min_ts < end,
            c.max_ts >= start,
            or_(c.committed_at.is_(None), and_(c.committed_at > since)),
        )
    )
    paths = []
    for path, commit_id, committed_at, sequence in rows:
        if committed_at is None:
            unseen = commit_id is None or str(commit_id) not in in_snapshots
        else:  # settled on expiry (no sequence): old, in every reader's snapshot
            unseen = sequence is not None and int(sequence) > sequence_number
        if unseen:
            paths.append(str(path))
    return paths


def waiting(conn: Connection, table_name: str | None = None) -> int:
    """How many staged files are not committed yet (all tables, or one)."""
    c = staged_files.c
    query = select(func.count()).where(c.committed_at.is_(None))
    if table_name is not None:
        query = query.where(c.table_name == table_name)
    return int(conn.execute(query).scalar_one())


def prune(conn: Connection, before: datetime) -> int:
    """Forget committed files committed before `before` (the table's metadata holds them)."""
    c = staged_files.c
    result = conn.execute(
        delete(staged_files).where(c.committed_at.is_not(None), c.committed_at < before)
    )
    return result.rowcount
