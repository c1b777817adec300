"""Automatic profiles: why each was requested (a finding, or the periodic sampler), what it cost
the budget, and the evidence its trace added to the finding: the chain finding -> profile ->
refined finding that the finding's view shows.

Kept apart from `findings` because an analyzer run refreshes a finding's evidence; the trace's
evidence must survive that. This module must never read a trace file.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    Connection,
    Float,
    Integer,
    String,
    Table,
    insert,
    select,
    update,
)

from warehouse.catalog.base import UTCDateTime, metadata, rows_where, utcnow

auto_profiles = Table(
    "auto_profiles",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("request_id", Integer, nullable=False, index=True),
    Column("job_id", String(255), nullable=False, index=True),
    Column("team", String(255)),
    Column("reason", String(16), nullable=False),  # "triggered" | "periodic"
    Column("finding_id", String(255), index=True),
    Column("rule_id", String(64)),
    Column("gpu_seconds", Float, nullable=False),
    Column("created", UTCDateTime, nullable=False),
    Column("trace_id", String(255)),
    Column("evidence", JSON),
)


@dataclass(frozen=True)
class AutoProfile:
    id: int
    request_id: int
    job_id: str
    team: str | None
    reason: str
    finding_id: str | None
    rule_id: str | None
    gpu_seconds: float
    created: datetime
    trace_id: str | None
    evidence: dict[str, Any] | None


def record_auto_profile(
    conn: Connection,
    *,
    request_id: int,
    job_id: str,
    team: str | None,
    reason: str,
    gpu_seconds: float,
    finding_id: str | None = None,
    rule_id: str | None = None,
    now: datetime | None = None,
) -> int:
    result = conn.execute(
        insert(auto_profiles).values(
            request_id=request_id, job_id=job_id, team=team, reason=reason,
            finding_id=finding_id, rule_id=rule_id, gpu_seconds=gpu_seconds,
            created=now or utcnow(),
        )
    )  # fmt: skip
    key = result.inserted_primary_key
    assert key is not None
    return int(key[0])


def auto_profiles_since(conn: Connection, since: datetime) -> list[AutoProfile]:
    query = select(auto_profiles).where(auto_profiles.c.created >= since)
    return [
        AutoProfile(**row) for row in conn.execute(query.order_by(auto_profiles.c.id)).mappings()
    ]


def auto_profiles_of(
    conn: Connection, *, request_id: int | None = None, finding_id: str | None = None
) -> list[AutoProfile]:
    rows = rows_where(conn, auto_profiles, request_id=request_id, finding_id=finding_id)
    return [AutoProfile(**row) for row in rows]


def set_trace_evidence(
    conn: Connection, auto_id: int, trace_id: str, evidence: dict[str, Any]
) -> None:
    conn.execute(
        update(auto_profiles)
        .where(auto_profiles.c.id == auto_id)
        .values(trace_id=trace_id, evidence=evidence)
    )
