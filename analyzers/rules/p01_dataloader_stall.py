"""P1, data-loader stall: the training loop waits on the next batch.

Sources: PyTorch profiler TensorBoard plugin (recommendation T1): DataLoader time above 5 % of step
time; TensorFlow profiler input-pipeline analysis: 20 % or more is "highly input-bound", 5 % or more
"moderately". Share = sum(data_wait_s) / sum(step_time_s) over the job's reported steps in the
window, skipping each rank's first 10 steps (workers spinning up; SageMaker Debugger skips the same
for step outliers).

Wasted GPU-hours: data-wait share x the job's training GPU-hours (rules.md; one GPU per rank): per
rank, the time its step reports cover (consecutive reports up to 5 min apart, plus the first step),
so phases without training (checkpoint load, evaluation) are not charged, and reports sampled every
few seconds count the same as one per step.
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
    inputs: ClassVar[tuple[str, ...]] = ("step_samples",)
    partition_by: ClassVar[PartitionKey] = "job"
    thresholds: DataLoaderThresholds = field(default_factory=DataLoaderThresholds)

    def run(
        self, conn: duckdb.DuckDBPyConnection, window: Window, catalog: JobCatalog
    ) -> list[Finding]:
        th = self.thresholds
        rows = fetch(
            conn,
            f"""
            WITH s AS (
                SELECT *, t - lag(t) OVER (PARTITION BY job_id, rank ORDER BY t) AS gap_s
                FROM ({steps_sql(window, th.skip_steps)})
            )
            SELECT job_id, list(DISTINCT host ORDER BY host) AS hosts, count(*) AS steps,
                   count(DISTINCT rank) AS ranks,
                   sum(data_wait_s) / sum(step_time_s) AS share,
                   sum(CASE WHEN gap_s IS NULL THEN step_time_s WHEN gap_s <= 300 THEN gap_s
                            ELSE step_time_s END) / 3600.0 AS step_h,
                   median(step_time_s) AS step_median_s, median(data_wait_s) AS wait_median_s,
                   min(t - step_time_s) AS t0, max(t) AS t1
            FROM s WHERE data_wait_s IS NOT NULL GROUP BY job_id HAVING count(*) >= ?
            ORDER BY job_id
            """,
            [th.min_steps],
        )
        findings = []
        for row in rows:
            share = float(row["share"] or 0.0)
            if share <= th.moderate_share:
                continue
            high = share >= th.high_share
            gpu_h = float(row["step_h"])
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
                    estimate_method="data-wait share of step time x the ranks' training GPU-hours",
                    evidence={
                        "data_wait_share": r(share),
                        "threshold": th.high_share if high else th.moderate_share,
                        "steps": int(row["steps"]),
                        "ranks": int(row["ranks"]),
                        "step_median_s": r(row["step_median_s"]),
                        "data_wait_median_s": r(row["wait_median_s"]),
                        "training_gpu_hours": r(gpu_h),
                    },
                    table="step_samples",
                )
            )
        return findings
