"""What the read API answers: findings, the opportunities ranking and one job, as JSON.

Reads the catalog only (findings, suppressions, jobs, hosts, GPU allocations), never telemetry:
an answer costs a few indexed catalog queries whichever mode the server runs in (the catalog is
SQLite beside an embedded server, PostgreSQL behind fleet gateways). Suppressed findings are left
out unless `state=suppressed` or `state=all` asks for them, as `fleetscope findings` does; the
ranking counts a job flagged by several rules once (analyzers.reports.ranking.counted_once).
A finding's cluster is its job's (the jobs table), else its host's (the hosts table).
Must never write the catalog.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, select

from analyzers.read_api.params import Page, Window
from analyzers.run.results import StoredFinding, _matches, from_catalog
from warehouse.catalog import findings as cat
from warehouse.catalog import fleet

STATES = ("open", "acknowledged", "suppressed", "all")


@dataclass(frozen=True)
class Filters:
    """What a findings or opportunities request narrows to; None: no narrowing."""

    window: Window
    team: str | None = None
    cluster: str | None = None
    rule: str | None = None
    state: str = "open"
    job_id: str | None = None


@dataclass(frozen=True)
class Row:
    finding_id: str
    stored: StoredFinding
    cluster: str | None


def rows(catalog: Engine, filters: Filters) -> list[Row]:
    """Findings overlapping the window that pass every filter, most wasted GPU-hours first."""
    with catalog.connect() as conn:
        found = cat.list_findings(
            conn, rule_id=filters.rule, job_id=filters.job_id, since=filters.window.start
        )
        rules = cat.list_suppressions(conn)
        job_ids = sorted({f.job_id for f in found if f.job_id})
        hosts = sorted({f.host for f in found if f.host})
        job_cluster = _clusters(conn, fleet.jobs, fleet.jobs.c.job_id, job_ids)
        host_cluster = _clusters(conn, fleet.hosts, fleet.hosts.c.host, hosts)
    out: list[Row] = []
    for row in found:
        if row.window_start >= filters.window.end:
            continue
        state = "suppressed" if row.state == "suppressed" or _matches(row, rules) else row.state
        if filters.state != "all" and state != filters.state:
            continue
        if filters.team is not None and row.team != filters.team:
            continue
        cluster = job_cluster.get(row.job_id or "") or host_cluster.get(row.host or "")
        if filters.cluster is not None and cluster != filters.cluster:
            continue
        stored = from_catalog(row)
        out.append(Row(row.finding_id, StoredFinding(stored.finding, state, *_seen(row)), cluster))
    return out


def _seen(row: cat.Finding) -> tuple[datetime | None, datetime | None]:
    return row.first_seen, row.last_seen


def _clusters(conn: Any, table: Any, key: Any, wanted: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for start in range(0, len(wanted), 500):  # IN lists in chunks, as the exporter reads jobs
        chunk = wanted[start : start + 500]
        for name, cluster in conn.execute(select(key, table.c.cluster).where(key.in_(chunk))):
            if cluster:
                out[name] = cluster
    return out


def finding_json(row: Row) -> dict[str, Any]:
    f = row.stored.finding
    return {
        "finding_id": row.finding_id,
        "rule_id": f.rule_id,
        "severity": str(f.severity),
        "state": row.stored.state,
        "title": f.title,
        "job_id": f.job_id,
        "job_name": f.job_name,
        "user": f.user,
        "team": f.team,
        "cluster": row.cluster,
        "host": f.host,
        "gpus": list(f.gpus),
        "window_start": _iso(f.window_start),
        "window_end": _iso(f.window_end),
        "wasted_gpu_hours": f.wasted_gpu_hours,
        "estimate_method": f.estimate_method,
        "recommendation": f.recommendation,
        "evidence": dict(f.evidence),
        "first_seen": _iso(row.stored.first_seen),
        "last_seen": _iso(row.stored.last_seen),
    }


def paged(items: list[dict[str, Any]], page: Page) -> dict[str, Any]:
    chunk = items[page.offset : page.offset + page.limit]
    following = page.offset + len(chunk)
    return {
        "items": chunk,
        "total": len(items),
        "limit": page.limit,
        "offset": page.offset,
        "next_offset": following if following < len(items) else None,
    }


def opportunities_json(catalog: Engine, filters: Filters, by: str, top: int) -> dict[str, Any]:
    from analyzers.reports.ranking import rank
    from analyzers.run.results import CatalogJobs

    found = [r.stored.finding for r in rows(catalog, filters)]
    report = rank(found, by=by, catalog=CatalogJobs(catalog), top=top)  # type: ignore[arg-type]
    return {
        "window": filters.window.label,
        "start": _iso(filters.window.start),
        "end": _iso(filters.window.end),
        "group_by": by,
        "total_gpu_hours": report.total_gpu_hours,
        **{
            key: [
                {
                    "key": line.key,
                    "gpu_hours": line.gpu_hours,
                    "findings": line.findings,
                    "jobs": sorted(line.jobs),
                    "rules": dict(sorted(line.rules.items())),
                }
                for line in getattr(report, key)
            ]
            for key in ("by_rule", "by_group", "top_jobs")
        },
    }


def job_json(catalog: Engine, job_id: str, filters: Filters) -> dict[str, Any] | None:
    """The job's catalog record, GPUs and findings; None when the catalog knows nothing of it."""
    from analyzers.reports.ranking import counted_once

    with catalog.connect() as conn:
        job = fleet.get_job(conn, job_id)
        gpus = fleet.allocations(conn, job_id=job_id)
    found = rows(catalog, filters)
    if job is None and not gpus and not found:
        return None
    open_ = [r.stored.finding for r in found if r.stored.state == "open"]
    best = counted_once(
        open_,
        lambda f: (job_id, (f.bucket_start or f.window_start).isoformat()),
        lambda f: f.wasted_gpu_hours,
    )
    return {
        "job_id": job_id,
        "cluster": job.cluster if job else None,
        "user": job.user if job else None,
        "team": job.team if job else None,
        "name": job.name if job else None,
        "model": job.model if job else None,
        "scheduler": job.scheduler if job else None,
        "start": _iso(job.start_ts) if job else None,
        "end": _iso(job.end_ts) if job else None,
        "gpus": [
            {
                "host": a.host,
                "gpu_index": a.gpu_index,
                "gpu_uuid": a.gpu_uuid,
                "mig_profile": a.mig_profile,
                "first_ts": _iso(a.first_ts),
                "last_ts": _iso(a.last_ts),
            }
            for a in gpus
        ],
        "recoverable_gpu_hours": sum(f.wasted_gpu_hours for f in best),
        "findings": [finding_json(r) for r in found],
    }


def _iso(ts: datetime | None) -> str | None:
    return ts.isoformat().replace("+00:00", "Z") if ts is not None else None
