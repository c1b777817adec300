"""Helpers every rule module shares: fetching rows as dicts, per-job aggregates over the window
frame, and building findings that carry the job's owner. No thresholds live here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from analyzers.accounting.frames import Frame, sample_ref
from analyzers.findings import Finding, Severity

if TYPE_CHECKING:
    import duckdb

    from analyzers.base import JobCatalog
    from analyzers.run.window import Window


def fetch(
    conn: duckdb.DuckDBPyConnection, sql: str, params: Sequence[object] = ()
) -> list[dict[str, Any]]:
    cursor = conn.execute(sql, list(params))
    names = [d[0] for d in cursor.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def utc(epoch_s: float) -> datetime:
    return datetime.fromtimestamp(epoch_s, UTC)


def r(value: float | None, digits: int = 4) -> float | None:
    """Round a number for evidence (None stays None)."""
    return None if value is None else round(float(value), digits)


@dataclass(frozen=True, slots=True)
class JobRow:
    """A job's aggregate over the window frame (time-weighted over its GPUs)."""

    job_id: str
    hosts: tuple[str, ...]
    gpus: tuple[str, ...]  # "host:gpu" labels
    alloc_h: float
    warm_h: float
    first_t: float
    last_t: float
    util_mean: float | None
    util_mean_all: float | None
    util_max_all: float | None
    sm_mean: float | None
    tensor_mean: float | None
    dram_mean: float | None
    active_mean: float | None
    n_warm: int
    n_sm: int
    n_tensor: int
    n_dram: int
    fb_used_max_mib: float | None
    fb_total_mib: float | None
    fb_frac_p95: float | None
    gpu_model: str | None
    mig: bool

    @property
    def host(self) -> str | None:
        """The job's host when it ran on one; None for a multi-host job (hosts in evidence)."""
        return self.hosts[0] if len(self.hosts) == 1 else None

    @property
    def gpu_labels(self) -> tuple[str, ...]:
        """GPU labels for a finding: bare on a single host, "host:gpu" across hosts."""
        if len(self.hosts) == 1:
            return tuple(g.split(":", 1)[1] for g in self.gpus)
        return self.gpus


def job_rows(conn: duckdb.DuckDBPyConnection, frame: Frame) -> list[JobRow]:
    """Per-job aggregates from the frame's (job, host, GPU) statistics, time-weighted."""
    rows = fetch(
        conn,
        f"""
        SELECT job_id,
               list(DISTINCT host ORDER BY host) AS hosts,
               list(host || ':' || gpu ORDER BY host, gpu) AS gpus,
               sum(alloc_h) AS alloc_h, COALESCE(sum(warm_h), 0) AS warm_h,
               min(first_t) AS first_t, max(last_t) AS last_t,
               sum(util_mean * warm_h) / sum(warm_h) FILTER (WHERE util_mean IS NOT NULL) AS util_mean,
               sum(util_mean_all * alloc_h) / sum(alloc_h) FILTER (WHERE util_mean_all IS NOT NULL)
                   AS util_mean_all,
               max(util_max_all) AS util_max_all,
               sum(sm_mean * warm_h) / sum(warm_h) FILTER (WHERE sm_mean IS NOT NULL) AS sm_mean,
               sum(tensor_mean * warm_h) / sum(warm_h) FILTER (WHERE tensor_mean IS NOT NULL)
                   AS tensor_mean,
               sum(dram_mean * warm_h) / sum(warm_h) FILTER (WHERE dram_mean IS NOT NULL) AS dram_mean,
               sum(active_mean * alloc_h) / sum(alloc_h) FILTER (WHERE active_mean IS NOT NULL)
                   AS active_mean,
               sum(n_warm) AS n_warm, sum(n_sm) AS n_sm, sum(n_tensor) AS n_tensor,
               sum(n_dram) AS n_dram,
               max(fb_used_max_mib) AS fb_used_max_mib, max(fb_total_mib) AS fb_total_mib,
               max(fb_frac_p95) AS fb_frac_p95,
               any_value(gpu_model) AS gpu_model,
               bool_or(mig_profile IS NOT NULL) AS mig
        FROM {frame.jobgpu} GROUP BY job_id ORDER BY job_id
        """,
    )
    out = []
    for row in rows:
        row["hosts"] = tuple(row["hosts"])
        row["gpus"] = tuple(row["gpus"])
        for key in ("n_warm", "n_sm", "n_tensor", "n_dram"):
            row[key] = int(row[key] or 0)
        out.append(JobRow(**row))
    return out


def make_finding(
    catalog: JobCatalog,
    window: Window,
    *,
    rule_id: str,
    severity: Severity,
    job_id: str | None,
    host: str | None,
    gpus: Sequence[str],
    start_t: float,
    end_t: float,
    title: str,
    recommendation: str,
    wasted_gpu_hours: float,
    estimate_method: str,
    evidence: dict[str, Any],
    table: str = "gpu_samples",
    scope: str = "",
) -> Finding:
    """A finding over [start_t, end_t) (epoch seconds, clipped to the window), owner filled in."""
    start = max(utc(start_t), window.start)
    end = max(min(utc(end_t), window.end), start)
    evidence = {**evidence, "samples": sample_ref(table, host, list(gpus), start_t, end_t)}
    info = catalog.get(job_id) if job_id else None
    return Finding(
        rule_id=rule_id,
        severity=severity,
        job_id=job_id,
        host=host,
        gpus=tuple(gpus),
        window_start=start,
        window_end=end,
        title=title,
        recommendation=recommendation,
        wasted_gpu_hours=max(wasted_gpu_hours, 0.0),
        estimate_method=estimate_method,
        evidence=evidence,
        user=info.user if info else None,
        team=info.team if info else None,
        job_name=info.name if info else None,
        bucket_start=window.start,
        scope=scope,
    )


def gpu_with_host_sql(frame: Frame, window: Window, max_age_s: float = 300.0) -> str:
    """A SELECT of the window's judged GPU samples, each joined (as-of) with the latest host
    sample at or before it: the job's own cgroup row when there is one, else the host-wide row.
    Columns: job_id, host, gpu, t, dt_s, util_pct, fb_used_mib, fb_total_mib, cpu_pct, iowait_pct
    (cpu_pct = user + system; None when no host sample is younger than `max_age_s`)."""
    from analyzers.accounting.frames import ts_literal

    lo = ts_literal(window.start - timedelta(seconds=max_age_s))
    hi = ts_literal(window.end)
    return f"""
        WITH g AS (
            SELECT job_id, host, gpu, t, dt_s, util_pct, fb_used_mib, fb_total_mib
            FROM {frame.gpu} WHERE in_window AND warm AND util_pct IS NOT NULL
        ), hs AS (
            SELECT job_id, host, epoch(ts) AS t, cpu_user_pct + cpu_system_pct AS cpu_pct,
                   cpu_iowait_pct AS iowait_pct
            FROM host_samples WHERE ts >= {lo} AND ts < {hi}
        ), hj AS (SELECT * FROM hs WHERE job_id IS NOT NULL),
        hh AS (SELECT * EXCLUDE (job_id) FROM hs WHERE job_id IS NULL),
        a AS (
            SELECT g.*, hj.t AS tj, hj.cpu_pct AS cpu_j, hj.iowait_pct AS io_j
            FROM g ASOF LEFT JOIN hj ON g.job_id = hj.job_id AND g.host = hj.host AND g.t >= hj.t
        ), b AS (
            SELECT a.*, hh.t AS th, hh.cpu_pct AS cpu_h, hh.iowait_pct AS io_h
            FROM a ASOF LEFT JOIN hh ON a.host = hh.host AND a.t >= hh.t
        )
        SELECT job_id, host, gpu, t, dt_s, util_pct, fb_used_mib, fb_total_mib,
               CASE WHEN t - tj <= {max_age_s} THEN cpu_j
                    WHEN t - th <= {max_age_s} THEN cpu_h END AS cpu_pct,
               CASE WHEN t - tj <= {max_age_s} AND io_j IS NOT NULL THEN io_j
                    WHEN t - th <= {max_age_s} THEN io_h END AS iowait_pct
        FROM b
    """
