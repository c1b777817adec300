"""Shared per-window working tables: the GPU samples of a window with accounting columns, and
per (job, host, GPU) statistics, built once per window and read by every telemetry rule.

The accounting (rules.md, "Accounting every rule shares": sample seconds `dt_s`, allocated
hours, utilization % and the active fraction) is `analyzers.accounting.sql`, whose SQL this module
uses; the dashboard's and reports' GPU-hours come from the same definition. On top of it:

- Rule statistics pool every sample of the job in the window, start-up included: a job-mean is
  over the same time its allocated hours count (rules.md, "Accounting every rule shares"; jobstats'
  job-mean utilization). `startup_grace_s` > 0 skips each job's first seconds instead (checkpoint
  load), as SageMaker Debugger's rules skip their first `patience` points; allocated hours always
  count them.
- A rule may look back before the window (`FrameParams.lookback_s`, the longest of the pipeline's
  analyzers' `lookback_s`): R3 sees an idle stretch that began before a bucket's start, R1 a GPU
  begun just before it (issue 31). Those rows are `in_window` false and change nothing of the rows
  in the window, so every rule that reads only `in_window` rows (all but R1 and R3) finds what it
  found without them.

Temp tables live on the caller's connection, named after the window, so preparing twice is free.
This module must never write to the warehouse's own tables.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from analyzers.accounting.sql import (
    ACTIVE_FRACTION_SQL,
    DEFAULT_MAX_GAP_S,
    UTIL_PCT_SQL,
    next_gap_sql,
    sample_seconds_sql,
    typical_gap_sql,
)

if TYPE_CHECKING:
    import duckdb

    from analyzers.base import PartitionKey
    from analyzers.run.window import Window


# One GPU (MIG instance) of one job: the partition a sample's seconds are measured in.
_ONE_GPU = "job_id, host, gpu"


@dataclass(frozen=True, slots=True)
class FrameParams:
    """How samples become GPU-hours; settings `analyzers.max_gap_s` and `analyzers.startup_grace_s`."""

    max_gap_s: float = DEFAULT_MAX_GAP_S
    startup_grace_s: float = 0.0
    default_interval_s: float = 10.0  # agent.interval_s: used for a GPU seen once in a window
    # Samples before the window a rule needs to see (issue 31: R3's idle stretch that began
    # before the bucket's start): the longest `lookback_s` of the pipeline's analyzers.
    lookback_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Frame:
    """Names of the temp tables for one window: `gpu` (samples) and `jobgpu` (statistics)."""

    gpu: str
    jobgpu: str


def ts_literal(ts: datetime) -> str:
    return f"TIMESTAMPTZ '{ts.isoformat()}'"


def partition_clause(window: Window, key: PartitionKey, column_prefix: str = "") -> str:
    """SQL condition keeping this window's partition (true for unpartitioned or key "none")."""
    if window.partitions == 1 or key == "none":
        return "TRUE"
    column = {"job": "job_id", "host": "host"}[key]
    bucket = f"CAST(('0x' || substr(md5({column_prefix}{column}), 1, 8)) AS UBIGINT)"
    return f"{bucket} % {window.partitions} = {window.partition}"


def partition_of(value: str | None, partitions: int) -> int:
    """The partition a job id or host falls in: the same md5 bucket `partition_clause` computes."""
    if partitions == 1 or value is None:
        return 0
    return int(hashlib.md5(value.encode()).hexdigest()[:8], 16) % partitions


def table_exists(conn: duckdb.DuckDBPyConnection, name: str) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [name]
    ).fetchone()
    views = conn.execute(
        "SELECT count(*) FROM duckdb_views() WHERE view_name = ?", [name]
    ).fetchone()
    return bool((row and row[0]) or (views and views[0]))


def prepare(
    conn: duckdb.DuckDBPyConnection,
    window: Window,
    params: FrameParams | None = None,
    job_id: str | None = None,
) -> Frame:
    """Build (once) the window's temp tables on `conn` and return their names.

    The first call for a window on a connection fixes its parameters (the runner calls it first,
    with the settings' values); later calls, from analyzers, reuse the tables. `job_id` keeps
    one job only (the job summary).
    """
    p = params or FrameParams()
    digest = hashlib.sha1(f"{window.key()}|{job_id}".encode()).hexdigest()[:12]
    only_job = "TRUE" if job_id is None else "job_id = '" + job_id.replace("'", "''") + "'"
    frame = Frame(gpu=f"fs_gpu_{digest}", jobgpu=f"fs_jobgpu_{digest}")
    if table_exists(conn, frame.jobgpu):
        return frame
    # Rows before `graced` are the rules' look-back only: every column of the rows from `graced`
    # on (gaps, typical interval, a job's first sample, warm) is what it was without them.
    graced = ts_literal(window.start - timedelta(seconds=p.startup_grace_s))
    lookback = window.start - timedelta(seconds=max(p.startup_grace_s, p.lookback_s))
    conn.execute(f"""
        CREATE OR REPLACE TEMP TABLE {frame.gpu} AS
        WITH s AS (
            SELECT job_id, host,
                   CASE WHEN mig_instance_id IS NULL THEN CAST(gpu_index AS VARCHAR)
                        ELSE gpu_index || '/mig' || mig_instance_id END AS gpu,
                   gpu_index, mig_profile, gpu_model, ts, epoch(ts) AS t,
                   {UTIL_PCT_SQL} AS util_pct,
                   {ACTIVE_FRACTION_SQL} AS active_frac,
                   sm_active, tensor_active, dram_active, fb_used_mib,
                   fb_used_mib + fb_free_mib AS fb_total_mib,
                   sm_clock_mhz, temp_c, power_w,
                   power_violation_us, thermal_violation_us, clocks_event_reasons
            FROM gpu_samples
            WHERE ts >= {ts_literal(lookback)} AND ts < {ts_literal(window.end)}
              AND job_id IS NOT NULL AND {partition_clause(window, "job")} AND {only_job}
        ), g AS (
            SELECT *, {next_gap_sql(_ONE_GPU)} AS gap_s,
                   min(CASE WHEN ts >= {graced} THEN t END) OVER (PARTITION BY job_id) AS job_first_t
            FROM s
        ), m AS (
            SELECT *,
                   {typical_gap_sql(_ONE_GPU, f"CASE WHEN ts >= {graced} THEN gap_s END")} AS typical_s
            FROM g
        )
        SELECT * EXCLUDE (gap_s, typical_s),
               {sample_seconds_sql(p.max_gap_s, p.default_interval_s)} AS dt_s,
               COALESCE(t >= job_first_t + {p.startup_grace_s}, FALSE) AS warm,
               ts >= {ts_literal(window.start)} AS in_window
        FROM m
    """)
    conn.execute(f"""
        CREATE OR REPLACE TEMP TABLE {frame.jobgpu} AS
        WITH w AS (SELECT * FROM {frame.gpu} WHERE in_window)
        SELECT job_id, host, gpu,
               any_value(gpu_model) AS gpu_model, any_value(mig_profile) AS mig_profile,
               count(*) AS n_samples,
               sum(dt_s) / 3600.0 AS alloc_h,
               min(t) AS first_t, max(t + dt_s) AS last_t,
               sum(dt_s * util_pct) / sum(dt_s) FILTER (WHERE util_pct IS NOT NULL) AS util_mean_all,
               max(util_pct) AS util_max_all,
               sum(dt_s) FILTER (WHERE warm) / 3600.0 AS warm_h,
               count(*) FILTER (WHERE warm AND util_pct IS NOT NULL) AS n_warm,
               sum(dt_s * util_pct) FILTER (WHERE warm) / sum(dt_s) FILTER (WHERE warm AND util_pct IS NOT NULL)
                   AS util_mean,
               quantile_cont(util_pct, 0.05) FILTER (WHERE warm) AS util_p05,
               quantile_cont(util_pct, 0.95) FILTER (WHERE warm) AS util_p95,
               avg(CASE WHEN util_pct < 10 THEN 1.0 ELSE 0.0 END) FILTER (WHERE warm AND util_pct IS NOT NULL)
                   AS frac_util_lt10,
               sum(dt_s * active_frac) FILTER (WHERE active_frac IS NOT NULL)
                   / sum(dt_s) FILTER (WHERE active_frac IS NOT NULL) AS active_mean,
               count(sm_active) FILTER (WHERE warm) AS n_sm,
               sum(dt_s * sm_active) FILTER (WHERE warm) / sum(dt_s) FILTER (WHERE warm AND sm_active IS NOT NULL)
                   AS sm_mean,
               count(tensor_active) FILTER (WHERE warm) AS n_tensor,
               sum(dt_s * tensor_active) FILTER (WHERE warm)
                   / sum(dt_s) FILTER (WHERE warm AND tensor_active IS NOT NULL) AS tensor_mean,
               count(dram_active) FILTER (WHERE warm) AS n_dram,
               sum(dt_s * dram_active) FILTER (WHERE warm)
                   / sum(dt_s) FILTER (WHERE warm AND dram_active IS NOT NULL) AS dram_mean,
               max(fb_used_mib) AS fb_used_max_mib,
               max(fb_total_mib) AS fb_total_mib,
               quantile_cont(fb_used_mib / nullif(fb_total_mib, 0), 0.95) FILTER (WHERE warm)
                   AS fb_frac_p95
        FROM w GROUP BY job_id, host, gpu
    """)
    return frame


def sample_ref(
    table: str, host: str | None, gpus: list[str], start: float, end: float
) -> dict[str, object]:
    """The `evidence["samples"]` reference: where a reader finds the rows behind a finding."""
    return {"table": table, "host": host, "gpus": gpus, "from_epoch_s": start, "to_epoch_s": end}
