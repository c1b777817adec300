"""Where analyzer results live: findings, their state, suppressions, watermarks and runs, in the
warehouse catalog (`warehouse.catalog`, SQLite or PostgreSQL through SQLAlchemy).

`FindingStore.replace_window` is what makes runs idempotent: it upserts a run's findings by their
stable id and removes the *open* findings of the same rules, identity bucket and partition that the
run no longer produced (a condition that stopped holding as the window filled in). Acknowledged
and suppressed findings are never removed and keep their state across re-runs (the catalog's upsert
never touches state). Fields the catalog has no column for (title, job name, bucket, scope) travel
in `evidence["_meta"]`.

This module must never compute findings or read telemetry.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, select

from analyzers.accounting.frames import partition_of
from analyzers.base import JobInfo, PartitionKey
from analyzers.findings import Finding
from analyzers.run.window import Window
from warehouse.catalog import analysis, arrivals, fleet
from warehouse.catalog import findings as cat

if TYPE_CHECKING:
    from sqlalchemy import Engine

META = "_meta"


def to_catalog(finding: Finding) -> cat.Finding:
    evidence = dict(finding.evidence)
    evidence[META] = {
        "title": finding.title,
        "job_name": finding.job_name,
        "bucket_start": (finding.bucket_start or finding.window_start).isoformat(),
        "scope": finding.scope,
    }
    return cat.Finding(
        finding_id=finding.finding_id,
        rule_id=finding.rule_id,
        severity=str(finding.severity),
        window_start=finding.window_start,
        window_end=finding.window_end,
        wasted_gpu_hours=finding.wasted_gpu_hours,
        job_id=finding.job_id,
        user=finding.user,
        team=finding.team,
        host=finding.host,
        gpus=list(finding.gpus),
        estimate_method=finding.estimate_method,
        evidence=evidence,
        recommendation=finding.recommendation,
    )


@dataclass(frozen=True)
class StoredFinding:
    """A finding as stored, with the state a person gave it."""

    finding: Finding
    state: str
    first_seen: datetime | None
    last_seen: datetime | None


def from_catalog(row: cat.Finding) -> StoredFinding:
    evidence = dict(row.evidence or {})
    meta: dict[str, Any] = evidence.pop(META, {}) or {}
    bucket = meta.get("bucket_start")
    finding = Finding(
        rule_id=row.rule_id,
        severity=row.severity,  # type: ignore[arg-type]  # Finding coerces to Severity
        job_id=row.job_id,
        host=row.host,
        gpus=tuple(str(g) for g in row.gpus or ()),
        window_start=row.window_start,
        window_end=row.window_end,
        title=str(meta.get("title", "")),
        recommendation=row.recommendation or "",
        wasted_gpu_hours=row.wasted_gpu_hours,
        estimate_method=row.estimate_method or "",
        evidence=evidence,
        user=row.user,
        team=row.team,
        job_name=meta.get("job_name"),
        bucket_start=datetime.fromisoformat(bucket) if bucket else None,
        scope=str(meta.get("scope", "")),
    )
    return StoredFinding(finding, row.state, row.first_seen, row.last_seen)


_SCOPE_FIELD = {"rule": "rule_id", "job": "job_id", "user": "user", "team": "team"}


def _matches(row: cat.Finding, rules: Sequence[cat.Suppression]) -> bool:
    """Whether a suppression covers a finding: its scope's value equals the finding's, and its
    rule (when it names one) is the finding's. (warehouse.catalog.findings.is_suppressed reads a
    `job` attribute the catalog's Finding does not have; reported to its owner.)"""
    return any(
        (rule.rule_id is None or rule.rule_id == row.rule_id)
        and getattr(row, _SCOPE_FIELD[rule.scope]) == rule.value
        for rule in rules
    )


class CatalogJobs:
    """The JobCatalog over the catalog's `jobs` table, cached for the life of one run."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._cache: dict[str, JobInfo | None] = {}

    def get(self, job_id: str) -> JobInfo | None:
        if job_id not in self._cache:
            with self._engine.connect() as conn:
                job = fleet.get_job(conn, job_id)
            self._cache[job_id] = (
                JobInfo(job.job_id, job.user, job.team, job.name, job.model) if job else None
            )
        return self._cache[job_id]


class FindingStore:
    """Findings, suppressions, watermarks and runs on one catalog engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def replace_window(
        self,
        found: Sequence[Finding],
        *,
        rule_ids: Iterable[str],
        partition_by: PartitionKey,
        window: Window,
        run_id: str | None,
    ) -> int:
        """Upsert `found`; drop open findings of these rules, bucket and partition not in it.

        Returns how many stale findings were removed.
        """
        keep = {f.finding_id for f in found}
        table = cat.findings
        with self.engine.begin() as conn:
            cat.upsert_findings(conn, [to_catalog(f) for f in found], run_id=run_id)
            rows = conn.execute(
                select(table.c.finding_id, table.c.job_id, table.c.host).where(
                    table.c.rule_id.in_(list(rule_ids)),
                    table.c.state == "open",
                    table.c.window_start >= window.start,
                    table.c.window_start < window.end,
                )
            ).all()
            stale = [
                fid
                for fid, job_id, host in rows
                if fid not in keep
                and (
                    partition_by == "none"
                    or partition_of(job_id if partition_by == "job" else host, window.partitions)
                    == window.partition
                )
            ]
            if stale:
                conn.execute(delete(table).where(table.c.finding_id.in_(stale)))
        return len(stale)

    def findings(
        self,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        job_id: str | None = None,
        rule_id: str | None = None,
        include_suppressed: bool = False,
    ) -> list[StoredFinding]:
        """Stored findings overlapping [since, until), most wasted first; suppressed ones (by state
        or by a matching suppression) only when asked for."""
        with self.engine.connect() as conn:
            rows = cat.list_findings(conn, job_id=job_id, rule_id=rule_id, since=since, until=until)
            rules = cat.list_suppressions(conn)
        out = []
        for row in rows:
            suppressed = row.state == "suppressed" or _matches(row, rules)
            if suppressed and not include_suppressed:
                continue
            stored = from_catalog(row)
            if suppressed and stored.state == "open":
                stored = StoredFinding(stored.finding, "suppressed", row.first_seen, row.last_seen)
            out.append(stored)
        return out

    def set_state(self, finding_id: str, state: cat.FindingState) -> None:
        with self.engine.begin() as conn:
            cat.set_finding_state(conn, finding_id, state)

    def suppress(
        self,
        scope: cat.SuppressionScope,
        value: str,
        *,
        rule_id: str | None = None,
        reason: str | None = None,
    ) -> int:
        with self.engine.begin() as conn:
            return cat.add_suppression(conn, scope, value, rule_id=rule_id, reason=reason)

    def watermark(self, analyzer: str, partition: str = "") -> datetime | None:
        with self.engine.connect() as conn:
            return analysis.get_watermark(conn, analyzer, partition)

    def advance_watermark(self, analyzer: str, partition: str, ts: datetime) -> None:
        with self.engine.begin() as conn:
            analysis.set_watermark(conn, analyzer, partition, ts)

    def owed(self, partition: str) -> list[arrivals.Owed]:
        """Buckets that received data since `partition` last analysed them (arrival-driven)."""
        with self.engine.connect() as conn:
            return arrivals.owed(conn, partition)

    def arrived_through(self, since: datetime) -> datetime | None:
        """The newest sample time every cluster committing since `since` has delivered."""
        with self.engine.connect() as conn:
            return arrivals.arrived_through(conn, since)

    def mark_bucket(
        self, partition: str, bucket_start: datetime, arrival_at: datetime, state: str
    ) -> None:
        """Record that `partition` analysed (or skipped) a bucket up to arrival `arrival_at`."""
        from warehouse.catalog.base import utcnow

        with self.engine.begin() as conn:
            arrivals.mark(conn, partition, bucket_start, arrival_at, state, utcnow())

    def analysed_through(self, partition: str, bucket_start: datetime) -> datetime | None:
        with self.engine.connect() as conn:
            return arrivals.analysed_through(conn, partition, bucket_start)

    def skipped_buckets(self) -> list[tuple[str, datetime, datetime]]:
        with self.engine.connect() as conn:
            return arrivals.skipped(conn)

    def start_run(self, run_id: str, analyzer: str, window: Window) -> None:
        with self.engine.begin() as conn:
            analysis.start_run(
                conn,
                run_id,
                analyzer,
                window.start,
                window.end,
                partition=f"{window.partition}/{window.partitions}",
            )

    def finish_run(
        self,
        run_id: str,
        *,
        findings: int = 0,
        stats: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> None:
        with self.engine.begin() as conn:
            analysis.finish_run(conn, run_id, findings=findings, stats=stats, error=error)

    def runs(self, analyzer: str | None = None) -> list[analysis.AnalyzerRun]:
        with self.engine.connect() as conn:
            return analysis.list_runs(conn, analyzer)
