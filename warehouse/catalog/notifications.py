"""Which findings were notified on which channel, so each is sent at most once.

A row is the claim a notifier makes before it sends: inserting it fails when another notifier
(another fleet gateway, or this one's previous round) already claimed the same (finding, channel,
severity), so no two processes send the same notification. A failed delivery deletes its claim,
and the next round tries again. The severity is part of the key: a finding that escalates (warn to
critical under the same id: the same rule, job, GPUs and window) is notified again, once, as
escalated. This module must never send anything.
"""

from __future__ import annotations

from sqlalchemy import Column, Connection, Engine, String, Table, delete, select
from sqlalchemy.exc import IntegrityError

from warehouse.catalog.base import UTCDateTime, metadata, utcnow

notifications_sent = Table(
    "notifications_sent",
    metadata,
    Column("finding_id", String(255), primary_key=True),
    Column("channel", String(32), primary_key=True),
    Column("severity", String(16), primary_key=True),
    Column("sent_at", UTCDateTime, nullable=False),
)


def claim(engine: Engine, finding_id: str, channel: str, severity: str) -> bool:
    """Claim (finding, channel, severity) for sending; False when it was claimed before. A
    transaction of its own: a refused insert ends the transaction it runs in on PostgreSQL."""
    try:
        with engine.begin() as conn:
            conn.execute(
                notifications_sent.insert().values(
                    finding_id=finding_id, channel=channel, severity=severity, sent_at=utcnow()
                )
            )
    except IntegrityError:
        return False
    return True


def release(conn: Connection, finding_id: str, channel: str, severity: str) -> None:
    """Forget a claim whose delivery failed, so the next round sends it again."""
    table = notifications_sent
    conn.execute(
        delete(table).where(
            table.c.finding_id == finding_id,
            table.c.channel == channel,
            table.c.severity == severity,
        )
    )


def severities_notified(
    conn: Connection, finding_ids: list[str], channel: str
) -> dict[str, set[str]]:
    """finding -> the severities already notified on `channel` (to tell new from escalated)."""
    table = notifications_sent
    out: dict[str, set[str]] = {}
    for start in range(0, len(finding_ids), 500):
        chunk = finding_ids[start : start + 500]
        query = select(table.c.finding_id, table.c.severity).where(
            table.c.channel == channel, table.c.finding_id.in_(chunk)
        )
        for finding_id, severity in conn.execute(query):
            out.setdefault(finding_id, set()).add(severity)
    return out
