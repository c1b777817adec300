"""P1, data-loader stall: the training loop waits on the next batch.

Sources: PyTorch profiler TensorBoard plugin (recommendation T1): DataLoader time above 5 % of step
time; TensorFlow profiler input-pipeline analysis: 20 % or more is "highly input-bound", 5 % or more
"moderately". Share = sum(data_wait_s) / sum(step_time_s) over the job's reported steps in the
window, skipping each rank's first 10 steps (workers spinning up; SageMaker Debugger skips the same
for step outliers).

Wasted GPU-hours: data-wait share x the job's training GPU-hours (rules.md): per rank, the time
its step reports cover (consecutive reports up to 5 min apart, plus the first step), so phases
without training (checkpoint load, evaluation) are not charged, and reports sampled every few
seconds count the same as one per step; times the GPUs a rank holds (`rank_gpu_share`: the job's
GPUs on the rank's host, shared by its ranks there, at most one each). A process without GPUs (a
CPU-only training run) still gets its finding, charged 0 GPU-hours (issue 31: "165 GPU-h/week
recoverable" for a CPU-only process).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from analyzers.accounting.frames import partition_clause, ts_literal
from analyzers.base import PartitionKey
from analyzers.findings import Finding, Severity
from analyzers.rules._common import fetch, make_finding, r

if TYPE_CHECKING:
    import duckdb

    from analyzers.base import JobCatalog
    from analyzers.run.window import Window


def rank_gpu_share_sql(window: Window, steps: str) -> str:
    """Per (job_id, host) of the `steps` relation: its ranks there, the GPUs the job's samples
    show on that host in the window, and each rank's share of a GPU, `least(1, gpus / ranks)`.

    Rules P1 and P2 turn rank-time into GPU-hours; a rank counts one GPU only where the job holds
    one for it (no GPU samples: 0, never an assumed GPU)."""
    return f"""
        SELECT r.job_id, r.host, r.ranks, coalesce(g.gpus, 0) AS gpus,
               least(1.0, coalesce(g.gpus, 0) / r.ranks) AS rank_gpu_share
        FROM (SELECT job_id, host, count(DISTINCT coalesce(rank, 0)) AS ranks
              FROM ({steps}) GROUP BY ALL) r
        LEFT JOIN (
            SELECT job_id, host, count(DISTINCT gpu_index) AS gpus FROM gpu_samples
            WHERE ts >= {ts_literal(window.start)} AND ts < {ts_literal(window.end)}
              AND job_id IN (SELECT DISTINCT job_id FROM ({steps}))
            GROUP BY ALL
        ) g ON g.job_id = r.job_id AND g.host = r.host
    """


def steps_sql(window: Window, skip_steps: int) -> str:
    """The window's reported steps of this partition, minus each rank's first `skip_steps`."""
    return f"""
        SELECT *, epoch(ts) AS t FROM step_samples
        WHERE ts >= {ts_literal(window.start)} AND ts < {ts_literal(window.end)}
          AND job_id IS NOT NULL AND step >= {int(skip_steps)}
          AND {partition_clause(window, "job")}
    """


@dataclass(frozen=True)
class DataLoaderThresholds:
    moderate_share: float = 0.05  # TB plugin T1 / TF profiler: > 5 % of step time
    high_share: float = 0.20  # TF profiler: >= 20 % is highly input-bound
    skip_steps: int = 10  # SageMaker Debugger: ignore each rank's first 10 steps
    min_steps: int = 20  # fleetscope: fewer reported steps say nothing


@dataclass
class DataLoaderStall:
    name: ClassVar[str] = "dataloader_stall"
    rule_ids: ClassVar[tuple[str, ...]] = ("P1",)
    rule_names: ClassVar[dict[str, str]] = {"P1": "Data-loader stall"}  # analyzers.rule_cards
    inputs: ClassVar[tuple[str, ...]] = ("step_samples", "gpu_samples")
    partition_by: ClassVar[PartitionKey] = "job"
    thresholds: DataLoaderThresholds = field(default_factory=DataLoaderThresholds)

    def run(
        self, conn: duckdb.DuckDBPyConnection, window: Window, catalog: JobCatalog
    ) -> list[Finding]:
        th = self.thresholds
        steps = steps_sql(window, th.skip_steps)
        rows = fetch(
            conn,
            f"""
            WITH s AS (
                SELECT *, t - lag(t) OVER (PARTITION BY job_id, rank ORDER BY t) AS gap_s
                FROM ({steps})
            ), held AS ({rank_gpu_share_sql(window, steps)}),
            job_gpus AS (SELECT job_id, sum(gpus) AS gpus FROM held GROUP BY job_id)
            SELECT s.job_id, list(DISTINCT s.host ORDER BY s.host) AS hosts, count(*) AS steps,
                   count(DISTINCT s.rank) AS ranks,
                   sum(data_wait_s) / sum(step_time_s) AS share,
                   sum(CASE WHEN gap_s IS NULL THEN step_time_s WHEN gap_s <= 300 THEN gap_s
                            ELSE step_time_s END) / 3600.0 AS step_h,
                   sum(CASE WHEN gap_s IS NULL THEN step_time_s WHEN gap_s <= 300 THEN gap_s
                            ELSE step_time_s END * held.rank_gpu_share) / 3600.0 AS gpu_h,
                   any_value(job_gpus.gpus) AS gpus,
                   median(step_time_s) AS step_median_s, median(data_wait_s) AS wait_median_s,
                   min(t - step_time_s) AS t0, max(t) AS t1
            FROM s JOIN held ON held.job_id = s.job_id AND held.host = s.host
            JOIN job_gpus ON job_gpus.job_id = s.job_id
            WHERE data_wait_s IS NOT NULL GROUP BY s.job_id HAVING count(*) >= ?
            ORDER BY s.job_id
            """,
            [th.min_steps],
        )
        findings = []
        for row in rows:
            share = float(row["share"] or 0.0)
            if share <= th.moderate_share:
                continue
            high = share >= th.high_share
            gpu_h = float(row["gpu_h"] or 0.0)
            hosts = list(row["hosts"])
            findings.append(
                make_finding(
                    catalog,
                    window,
                    rule_id="P1",
                    severity=Severity.CRITICAL if high else Severity.WARN,
                    job_id=row["job_id"],
                    host=hosts[0] if len(hosts) == 1 else None,
                    gpus=(),
                    start_t=row["t0"],
                    end_t=row["t1"],
                    title=f"{'highly' if high else 'moderately'} input-bound: {share:.0%} of step time waits for data",
                    recommendation=(
                        "Raise DataLoader num_workers, set pin_memory=True and persistent_workers="
                        "True, increase prefetch_factor, and move decoding/augmentation off the "
                        "critical path (GPU decode, pre-processed shards)."
                    ),
                    wasted_gpu_hours=share * gpu_h,
                    estimate_method=(
                        "data-wait share of step time x the ranks' training GPU-hours"
                        if row["gpus"]
                        else "no GPU samples for the job: a CPU-only process, 0 GPU-hours"
                    ),
                    evidence={
                        "data_wait_share": r(share),
                        "threshold": th.high_share if high else th.moderate_share,
                        "steps": int(row["steps"]),
                        "ranks": int(row["ranks"]),
                        "step_median_s": r(row["step_median_s"]),
                        "data_wait_median_s": r(row["wait_median_s"]),
                        "training_gpu_hours": r(gpu_h),
                        # rank-hours of training; GPU-hours only where a GPU held the rank
                        "training_rank_hours": r(float(row["step_h"])),
                        "gpus": int(row["gpus"] or 0),
                    },
                    table="step_samples",
                )
            )
        return findings
