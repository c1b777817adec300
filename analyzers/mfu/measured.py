"""Measured MFU per job from the step metrics: the SDK's FLOPs per step and steps per second.

Algorithm, over the window's reported steps that carry `flops_per_step` (contract schema version
2; an SDK that reported none, or an older agent, leaves the job without a measured MFU):

1. per rank (host, rank): FLOPs per step F = mean(flops_per_step) and steps per second
   S = steps / sum(step_time_s) (the time its reported steps took: sampled reports of short steps
   count the same as one per step);
2. per job: FLOPs per step = sum of the ranks' F (one data-parallel step on every rank), steps per
   second = sum(F x S) / sum(F) (the ranks step together; weighted by FLOPs where they do not),
   GPUs = the ranks reporting FLOPs (one GPU per rank, as the SDK runs in each rank's process);
3. MFU = FLOPs per step x steps per second / (GPUs x dense peak of the job's GPU model and dtype)
   (analyzers.mfu.mfu.measured_mfu; the GPU model is the one its gpu_samples name most often,
   none on MIG slices, whose peak is a share of the GPU's; the dtype the one its ranks report
   most often).

Also each job's training GPU-hours: per rank, the time its step reports cover (consecutive
reports up to 5 min apart, plus the first step), as P1 charges them: what a low-MFU finding's
recoverable hours are a share of. Never reads the catalog; never mixes in DCGM's proxy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from analyzers.accounting.frames import partition_clause, ts_literal
from analyzers.mfu.mfu import Mfu, measured_mfu

if TYPE_CHECKING:
    import duckdb

    from analyzers.run.window import Window

MAX_GAP_S: Final = 300.0  # P1's: reports further apart are two stretches of training

# The columns of one job's row (partial results of the MFU rule in fleet mode are these rows).
ROW_KEYS: Final = (
    "job_id", "gpu_model", "dtype", "ranks", "steps", "flops_per_step", "steps_per_s",
    "training_gpu_hours", "t0", "t1",
)  # fmt: skip


def job_rows(
    conn: duckdb.DuckDBPyConnection,
    window: Window,
    jobs: Sequence[str] | None = None,
    *,
    partitioned: bool = False,
) -> list[dict[str, Any]]:
    """One row per job with FLOPs in the window (ROW_KEYS), by job id; `jobs` narrows it."""
    only = ""
    params: list[Any] = []
    if jobs is not None:
        if not jobs:
            return []
        only = f"AND job_id IN ({', '.join('?' for _ in jobs)})"
        params = list(jobs)
    part = f"AND {partition_clause(window, 'job')}" if partitioned else ""
    span = f"ts >= {ts_literal(window.start)} AND ts < {ts_literal(window.end)}"
    rows = conn.execute(
        f"""
        WITH s AS (
            SELECT job_id, host, rank, epoch(ts) AS t, step_time_s, flops_per_step,
                   compute_dtype,
                   epoch(ts) - lag(epoch(ts)) OVER (PARTITION BY job_id, host, rank ORDER BY ts)
                       AS gap_s
            FROM step_samples
            WHERE {span} AND job_id IS NOT NULL AND flops_per_step > 0 AND step_time_s > 0
              {only} {part}
        ), per_rank AS (
            SELECT job_id, host, rank, avg(flops_per_step) AS f, count(*) AS n,
                   count(*) / sum(step_time_s) AS sps, mode(compute_dtype) AS dtype,
                   sum(CASE WHEN gap_s IS NULL OR gap_s > {MAX_GAP_S} THEN step_time_s
                            ELSE gap_s END) / 3600.0 AS h,
                   min(t - step_time_s) AS t0, max(t) AS t1
            FROM s GROUP BY ALL
        ), per_job AS (
            SELECT job_id, count(*) AS ranks, sum(n) AS steps, sum(f) AS flops_per_step,
                   sum(f * sps) / sum(f) AS steps_per_s, mode(dtype) AS dtype,
                   sum(h) AS training_gpu_hours, min(t0) AS t0, max(t1) AS t1
            FROM per_rank GROUP BY job_id
        ), models AS (
            -- a MIG slice has no dense peak in the table: no measured MFU, never a guessed one
            SELECT job_id, CASE WHEN bool_or(mig_profile IS NOT NULL) THEN NULL
                                ELSE mode(gpu_model) END AS gpu_model
            FROM gpu_samples
            WHERE {span} AND job_id IN (SELECT job_id FROM per_job) GROUP BY job_id
        )
        SELECT per_job.*, models.gpu_model FROM per_job LEFT JOIN models USING (job_id)
        ORDER BY job_id
        """,
        params,
    )
    names = [d[0] for d in rows.description]
    out = []
    for values in rows.fetchall():
        row = dict(zip(names, values, strict=True))
        out.append({key: row.get(key) for key in ROW_KEYS})
    return out


def mfu_of(row: Mapping[str, Any]) -> Mfu | None:
    """A job row's measured MFU, or None where its GPU model or dtype has no peak in the table."""
    return measured_mfu(
        float(row["flops_per_step"] or 0.0),
        float(row["steps_per_s"] or 0.0),
        int(row["ranks"] or 0),
        row["gpu_model"],
        str(row["dtype"] or ""),
    )


def job_mfu(
    conn: duckdb.DuckDBPyConnection, window: Window, jobs: Sequence[str] | None = None
) -> dict[str, tuple[Mfu, dict[str, Any]]]:
    """job id -> (measured MFU, its row), for the jobs that have one."""
    return with_mfu(job_rows(conn, window, jobs))


def with_mfu(rows: Iterable[Mapping[str, Any]]) -> dict[str, tuple[Mfu, dict[str, Any]]]:
    out: dict[str, tuple[Mfu, dict[str, Any]]] = {}
    for row in rows:
        found = mfu_of(row)
        if found is not None:
            out[str(row["job_id"])] = (found, dict(row))
    return out
