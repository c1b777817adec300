"""Analyzer findings and the suppressions that silence them.

A finding's id is a stable string the analyzer derives (rule, job, GPUs, window), so re-running an
analyzer over the same window updates the finding instead of adding one (idempotent runs,
design.md). Upserts refresh the evidence and the estimate but never the state a person set
(acknowledged, suppressed) nor `first_seen`. This module must never compute findings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Literal, get_args

from sqlalchemy import JSON, Column, Connection, Float, Integer, String, Table, Text, select, update

from fleetscope.errors import ConfigError, NotFoundError
from warehouse.catalog.base import Merge, UTCDateTime, metadata, upsert, utcnow

FindingState = Literal["open", "acknowledged", "suppressed"]
SuppressionScope = Literal["rule", "job", "user", "team"]

findings = Table(
    "findings",
    metadata,
    Column("finding_id", String(255), primary_key=True),
    Column("rule_id", String(64), nullable=False, index=True),
    Column("severity", String(16), nullable=False),
    Column("job_id", String(255), index=True),
    Column("user", String(255)),
    Column("team", String(255)),
    Column("host", String(255)),
    Column("gpus", JSON),
    Column("window_start", UTCDateTime, nullable=False),
    Column("window_end", UTCDateTime, nullable=False),
    Column("wasted_gpu_hours", Float, nullable=False),
    Column("estimate_method", String(255)),
    Column("evidence", JSON),
    Column("recommendation", Text),
    Column("state", String(16), nullable=False, default="open"),
    Column("first_seen", UTCDateTime, nullable=False),
    Column("last_seen", UTCDateTime, nullable=False),
    Column("run_id", String(64)),
)

suppressions = Table(
    "suppressions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("scope", String(16), nullable=False),
    Column("value", String(255), nullable=False),
    Column("rule_id", String(64)),
    Column("reason", Text),
    Column("created", UTCDateTime, nullable=False),
)


@dataclass(frozen=True)
class Finding:
    finding_id: str
    rule_id: str
    severity: str
    window_start: datetime
    window_end: datetime
    wasted_gpu_hours: float
    job_id: str | None = None
    user: str | None = None
    team: str | None = None
    host: str | None = None
    gpus: list[Any] | None = None
    estimate_method: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    recommendation: str | None = None
    state: FindingState = "open"
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    run_id: str | None = None


@dataclass(frozen=True)
class Suppression:
    id: int
    scope: SuppressionScope
    value: str
    rule_id: str | None
    reason: str | None
    created: datetime


_REFRESHED = [
    "rule_id",
    "severity",
    "job_id",
    "user",
    "team",
    "host",
    "gpus",
    "window_start",
    "window_end",
    "wasted_gpu_hours",
    "estimate_method",
    "evidence",
    "recommendation",
    "last_seen",
    "run_id",
]
_MERGE: dict[str, Merge] = {c: "replace" for c in _REFRESHED}
_MERGE["window_start"] = "least"


def upsert_findings(
    conn: Connection, found: Sequence[Finding], *, run_id: str | None, now: datetime | None = None
) -> None:
    """Insert new findings, refresh known ones; state and first_seen of known ones are kept."""
    at = now or utcnow()
    rows = []
    for finding in found:
        row = asdict(finding)
        row.update(first_seen=finding.first_seen or at, last_seen=at, run_id=run_id)
        rows.append(row)
    upsert(conn, findings, rows, ["finding_id"], _MERGE)


def set_finding_state(conn: Connection, finding_id: str, state: FindingState) -> None:
    if state not in get_args(FindingState):
        raise ConfigError(f"finding state must be one of {get_args(FindingState)}, not {state!r}")
    result = conn.execute(
        update(findings).where(findings.c.finding_id == finding_id).values(state=state)
    )
    if result.rowcount == 0:
        raise NotFoundError(f"no finding {finding_id!r}")


def list_findings(
    conn: Connection,
    *,
    state: FindingState | None = None,
    rule_id: str | None = None,
    job_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> list[Finding]:
    """Findings, most wasted GPU-hours first; with `since`, those whose window ends after it,
    with `until`, those whose window starts before it (a window's findings are read, not every
    later one's)."""
    query = select(findings).order_by(findings.c.wasted_gpu_hours.desc(), findings.c.finding_id)
    if state is not None:
        query = query.where(findings.c.state == state)
    if rule_id is not None:
        query = query.where(findings.c.rule_id == rule_id)
    if job_id is not None:
        query = query.where(findings.c.job_id == job_id)
    if since is not None:  # windows are [start, end): one ending at `since` is before it
        query = query.where(findings.c.window_end > since)
    if until is not None:
        query = query.where(findings.c.window_start < until)
    return [Finding(**row) for row in conn.execute(query).mappings()]


def add_suppression(
    conn: Connection,
    scope: SuppressionScope,
    value: str,
    *,
    rule_id: str | None = None,
    reason: str | None = None,
) -> int:
    if scope not in get_args(SuppressionScope):
        raise ConfigError(f"suppression scope must be one of {get_args(SuppressionScope)}")
    result = conn.execute(
        suppressions.insert().values(
            scope=scope, value=value, rule_id=rule_id, reason=reason, created=utcnow()
        )
    )
    key = result.inserted_primary_key
    assert key is not None
    return int(key[0])


def list_suppressions(conn: Connection) -> list[Suppression]:
    rows = conn.execute(select(suppressions).order_by(suppressions.c.id)).mappings()
    return [Suppression(**row) for row in rows]


def is_suppressed(finding: Finding, rules: Sequence[Suppression]) -> bool:
    """Whether a suppression matches: its scope's value equals the finding's, rule optional."""
    for rule in rules:
        if rule.rule_id is not None and rule.rule_id != finding.rule_id:
            continue
        subject = finding.rule_id if rule.scope == "rule" else getattr(finding, rule.scope)
        if subject == rule.value:
            return True
    return False
