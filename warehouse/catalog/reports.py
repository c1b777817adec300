"""Report runs: which weekly report was produced and sent, once per (kind, scope, week).

The unique key makes sending idempotent: `claim_report_run` returns False when the run exists, so
a repeated or late scheduler tick never mails a report twice. This module must never render a
report.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import (
    Column,
    Connection,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from fleetscope.errors import NotFoundError
from warehouse.catalog.base import UTCDateTime, metadata

report_runs = Table(
    "report_runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(32), nullable=False),
    Column("scope", String(255), nullable=False),
    Column("week", String(10), nullable=False),  # ISO week, e.g. 2026-W07
    Column("sent_at", UTCDateTime),
    Column("recipients", Text),
    Column("path", Text),
    UniqueConstraint("kind", "scope", "week", name="uq_report_runs_kind_scope_week"),
)


@dataclass(frozen=True)
class ReportRun:
    id: int
    kind: str
    scope: str
    week: str
    sent_at: datetime | None
    recipients: str | None
    path: str | None


def claim_report_run(conn: Connection, kind: str, scope: str, week: str) -> bool:
    """Record that this report is being produced; False when it already was (do nothing)."""
    try:
        with conn.begin_nested():
            conn.execute(report_runs.insert().values(kind=kind, scope=scope, week=week))
    except IntegrityError:
        return False
    return True


def mark_report_sent(
    conn: Connection,
    kind: str,
    scope: str,
    week: str,
    *,
    sent_at: datetime,
    recipients: str,
    path: str,
) -> None:
    result = conn.execute(
        update(report_runs)
        .where(report_runs.c.kind == kind, report_runs.c.scope == scope, report_runs.c.week == week)
        .values(sent_at=sent_at, recipients=recipients, path=path)
    )
    if result.rowcount == 0:
        raise NotFoundError(f"no report run {kind}/{scope}/{week}")


def list_report_runs(conn: Connection, kind: str | None = None) -> list[ReportRun]:
    query = select(report_runs).order_by(
        report_runs.c.week, report_runs.c.kind, report_runs.c.scope
    )
    if kind is not None:
        query = query.where(report_runs.c.kind == kind)
    return [ReportRun(**row) for row in conn.execute(query).mappings()]
