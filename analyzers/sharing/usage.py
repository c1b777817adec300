"""Each job GPU's measured profile in a window, from the warehouse's GPU samples: what the
planner needs to decide whether it can share (docs/sharing.md, "Inputs").

SM activity and DRAM activity are DCGM's profiling fields (`DCGM_FI_PROF_SM_ACTIVE`,
`DCGM_FI_PROF_DRAM_ACTIVE`, fractions of the whole GPU); when a GPU reports no SM activity
(no profiling module), utilization / 100 stands in for it, an over-estimate (utilization counts
a kernel on one SM as busy), so the planner errs towards not sharing. A job's data-wait share
(sum of `data_wait_s` over sum of `step_time_s`, as rule P1 computes it) comes from the steps
its training loop reports; None when it reports none.

Windows longer than `RAW_MAX_H` hours read the minute roll-up where it holds the window
(`analyzers.sharing.usage_minutes`, issue 31): a week of 1,000 GPUs is 60 M raw samples, 72-76 s
to profile, and the minute rows are a sixth of that at a 10 s interval. Its 95th percentiles are
of minute maxima, at or above the raw samples' (the percentile of minute means would be at or
below them and let jobs that burst within minutes pass as light), so on long windows the planner
errs towards not sharing (docs/sharing.md). Windows up to `RAW_MAX_H` (the planner's default
`min_hours`, so a short window a reader opens to see why a GPU was left alone is exact) stay on
raw samples: a few million rows at most, seconds to read.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from analyzers.accounting.frames import prepare, ts_literal
from analyzers.sharing.usage_minutes import minute_uses_sql, rolled_end

if TYPE_CHECKING:
    import duckdb

    from analyzers.run.window import Window

__all__ = ["RAW_MAX_H", "GpuUse", "gpu_uses"]

RAW_MAX_H: Final = 6.0  # longer windows read the minute roll-up where it holds the window


@dataclass(frozen=True)
class GpuUse:
    """One GPU of one job over the window; activity fractions are of the whole GPU."""

    job_id: str
    host: str
    gpu: str
    gpu_model: str
    job_gpus: int  # GPUs the job holds in the window
    alloc_h: float
    util_mean_pct: float
    util_p95_pct: float
    sm_mean: float
    sm_p95: float
    dram_mean: float
    dram_p95: float
    idle_share: float  # share of samples under 10 % utilization (burstiness with util_p95)
    fb_used_max_mib: float
    fb_total_mib: float
    on_mig: bool
    data_wait_share: float | None = None  # of step time, from the job's reported steps (SDK)

    @property
    def memory_share(self) -> float:
        return self.fb_used_max_mib / self.fb_total_mib if self.fb_total_mib else 1.0


def gpu_uses(conn: duckdb.DuckDBPyConnection, window: Window) -> list[GpuUse]:
    rolled = rolled_end(conn, window) if window.hours > RAW_MAX_H else None
    rows = _raw_rows(conn, window) if rolled is None else _minute_rows(conn, window, rolled)
    waits = _data_wait_shares(conn, window)
    return [replace(u, data_wait_share=waits.get(u.job_id)) for u in map(_use, rows)]


def _minute_rows(
    conn: duckdb.DuckDBPyConnection, window: Window, rolled: float
) -> list[tuple[Any, ...]]:
    return conn.execute(minute_uses_sql(window, rolled)).fetchall()


def _raw_rows(conn: duckdb.DuckDBPyConnection, window: Window) -> list[tuple[Any, ...]]:
    frame = prepare(conn, window)
    return conn.execute(f"""
        WITH q AS (
            SELECT job_id, host, gpu,
                   quantile_cont(sm_active, 0.95) AS sm_p95,
                   quantile_cont(dram_active, 0.95) AS dram_p95
            FROM {frame.gpu} WHERE in_window AND warm GROUP BY job_id, host, gpu
        ), n AS (
            SELECT job_id, count(*) AS job_gpus FROM {frame.jobgpu} GROUP BY job_id
        )
        SELECT j.job_id, j.host, j.gpu, coalesce(j.gpu_model, ''), n.job_gpus, j.alloc_h,
               coalesce(j.util_mean, 0), coalesce(j.util_p95, 0),
               coalesce(j.sm_mean, j.util_mean / 100.0, 1.0),
               coalesce(q.sm_p95, j.util_p95 / 100.0, 1.0),
               coalesce(j.dram_mean, 0), coalesce(q.dram_p95, j.dram_mean, 0),
               coalesce(j.frac_util_lt10, 0), coalesce(j.fb_used_max_mib, 0),
               coalesce(j.fb_total_mib, 0), j.mig_profile IS NOT NULL
        FROM {frame.jobgpu} j JOIN q USING (job_id, host, gpu) JOIN n USING (job_id)
        ORDER BY j.job_id, j.host, j.gpu
    """).fetchall()


def _data_wait_shares(conn: duckdb.DuckDBPyConnection, window: Window) -> dict[str, float]:
    """Each job's share of step time spent waiting on input (P1's measure), in the window."""
    tables = {
        r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables").fetchall()
    }
    if "step_samples" not in tables:
        return {}
    rows = conn.execute(f"""
        SELECT job_id, sum(data_wait_s) / sum(step_time_s) FROM step_samples
        WHERE ts >= {ts_literal(window.start)} AND ts < {ts_literal(window.end)}
          AND job_id IS NOT NULL AND data_wait_s IS NOT NULL AND step_time_s > 0
        GROUP BY job_id
    """).fetchall()
    return {str(job): float(share) for job, share in rows}


def _use(r: tuple[Any, ...]) -> GpuUse:
    f = [float(v) for v in r[5:15]]
    return GpuUse(
        str(r[0]), str(r[1]), str(r[2]), str(r[3]), int(r[4]), f[0], f[1], f[2], f[3], f[4],
        f[5], f[6], f[7], f[8], f[9], bool(r[15]),
    )  # fmt: skip
