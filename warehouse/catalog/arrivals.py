"""Arrival marks: which identity buckets received telemetry, when, and which were analysed.

Why: analysis is driven by arrival, not by the wall clock (issue 13). A replay, an import of
history, a late spool or Prometheus remote_write lands samples stamped hours or days ago; the
scheduler must find those buckets without anyone running a backfill. The writer's commit hook
(`warehouse.storage.arrival_hook`) records, per (bucket, cluster), the newest time rows for it were committed;
the scheduler records, per (partition, bucket), the arrival mark it analysed. A bucket is owed
work while its arrival mark is newer than what its partition analysed. Both marks are the
server's commit clock read from the same column, so they never compare two clocks. Buckets too
old to re-open (`analyzers.reopen_max_age_s`) are marked skipped, once, so they are reported.

This module must never hold telemetry samples, nor decide windows itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Column, Connection, String, Table, func, select

from warehouse.catalog.base import UTCDateTime, metadata, upsert

window_arrivals = Table(
    "window_arrivals",
    metadata,
    Column("bucket_start", UTCDateTime, primary_key=True),
    Column("cluster", String(255), primary_key=True),
    Column("first_arrival_at", UTCDateTime, nullable=False),
    Column("last_arrival_at", UTCDateTime, nullable=False),
    Column("min_ts", UTCDateTime, nullable=False),
    Column("max_ts", UTCDateTime, nullable=False),
)

window_analysed = Table(
    "window_analysed",
    metadata,
    Column("partition", String(255), primary_key=True),
    Column("bucket_start", UTCDateTime, primary_key=True),
    Column("arrival_at", UTCDateTime, nullable=False),  # the arrival mark this run covered
    Column("state", String(16), nullable=False),  # analysed | skipped
    Column("at", UTCDateTime, nullable=False),
)


@dataclass(frozen=True)
class Arrival:
    """Rows for one (bucket, cluster) committed at `arrived_at`, sample times min_ts..max_ts."""

    bucket_start: datetime
    cluster: str
    arrived_at: datetime
    min_ts: datetime
    max_ts: datetime


@dataclass(frozen=True)
class Owed:
    """A bucket whose newest arrival a partition has not analysed yet."""

    bucket_start: datetime
    arrival_at: datetime
    clusters: tuple[str, ...]
    analysed_at: datetime | None  # the arrival mark last analysed; None: never


def record_arrivals(conn: Connection, arrivals: Sequence[Arrival]) -> None:
    rows = [
        {
            "bucket_start": a.bucket_start,
            "cluster": a.cluster,
            "first_arrival_at": a.arrived_at,
            "last_arrival_at": a.arrived_at,
            "min_ts": a.min_ts,
            "max_ts": a.max_ts,
        }
        for a in arrivals
    ]
    upsert(
        conn,
        window_arrivals,
        rows,
        ["bucket_start", "cluster"],
        {
            "first_arrival_at": "least",
            "last_arrival_at": "greatest",
            "min_ts": "least",
            "max_ts": "greatest",
        },
    )


def owed(conn: Connection, partition: str) -> list[Owed]:
    """Buckets with an arrival newer than `partition`'s analysed (or skipped) mark, oldest first."""
    latest = (
        select(
            window_arrivals.c.bucket_start,
            func.max(window_arrivals.c.last_arrival_at).label("arrival_at"),
        )
        .group_by(window_arrivals.c.bucket_start)
        .subquery()
    )
    done = select(window_analysed).where(window_analysed.c.partition == partition).subquery()
    rows = conn.execute(
        select(latest.c.bucket_start, latest.c.arrival_at, done.c.arrival_at)
        .select_from(latest.outerjoin(done, done.c.bucket_start == latest.c.bucket_start))
        .where((done.c.arrival_at.is_(None)) | (latest.c.arrival_at > done.c.arrival_at))
        .order_by(latest.c.bucket_start)
    ).all()
    clusters: dict[datetime, list[str]] = {}
    for bucket, cluster in conn.execute(
        select(window_arrivals.c.bucket_start, window_arrivals.c.cluster)
    ).all():
        clusters.setdefault(bucket, []).append(cluster)
    return [Owed(b, a, tuple(sorted(clusters.get(b, []))), d) for b, a, d in rows]


def arrived_through(conn: Connection, since: datetime) -> datetime | None:
    """The newest sample time every reporting cluster has delivered: per cluster that committed
    rows at or after `since` (its commit clock), the newest sample time it committed; the
    smallest of those. None when no cluster committed since then. A cluster silent since before
    `since` does not hold the live window back (its rows are late: they re-open their bucket)."""
    per_cluster = (
        select(window_arrivals.c.cluster, func.max(window_arrivals.c.max_ts).label("through"))
        .where(window_arrivals.c.last_arrival_at >= since)
        .group_by(window_arrivals.c.cluster)
        .subquery()
    )
    through = conn.execute(select(func.min(per_cluster.c.through))).scalar()
    return through if isinstance(through, datetime) else None


def mark(
    conn: Connection,
    partition: str,
    bucket_start: datetime,
    arrival_at: datetime,
    state: str,
    at: datetime,
) -> None:
    """Record that `partition` analysed (or skipped) `bucket_start` up to arrival `arrival_at`."""
    row = {
        "partition": partition,
        "bucket_start": bucket_start,
        "arrival_at": arrival_at,
        "state": state,
        "at": at,
    }
    upsert(
        conn,
        window_analysed,
        [row],
        ["partition", "bucket_start"],
        {"arrival_at": "greatest", "state": "replace", "at": "replace"},
    )


def analysed_through(conn: Connection, partition: str, bucket_start: datetime) -> datetime | None:
    """The newest arrival mark `partition` recorded as analysed (or skipped) for the bucket."""
    value = conn.execute(
        select(window_analysed.c.arrival_at).where(
            window_analysed.c.partition == partition,
            window_analysed.c.bucket_start == bucket_start,
        )
    ).scalar_one_or_none()
    return value if isinstance(value, datetime) else None


def skipped(conn: Connection) -> list[tuple[str, datetime, datetime]]:
    """(partition, bucket_start, arrival_at) of every bucket skipped as too old to re-open."""
    rows = conn.execute(
        select(
            window_analysed.c.partition,
            window_analysed.c.bucket_start,
            window_analysed.c.arrival_at,
        )
        .where(window_analysed.c.state == "skipped")
        .order_by(window_analysed.c.bucket_start)
    ).all()
    return [(str(p), b, a) for p, b, a in rows]
