"""P2, step-time outliers: steps far slower than the steps just before them.

Source: SageMaker Debugger's StepOutlier rule: a step longer than the mean plus 3 standard
deviations of recent steps is an outlier; the first 10 steps are ignored. "Recent" is the previous
50 steps per rank (fleetscope's choice); the rule fires at 10 outliers (SageMaker's n_outliers).
Outliers that recur at a fixed step period (a scheduled evaluation or checkpoint every N steps:
spacing varying less than 10 %) are expected work, reported in the evidence and not fired on.

The window's step-time sketches (analyzers.quantiles.panes) screen jobs first: a job whose slowest step
is within `1 + min_excess` of its fastest cannot have an outlier (every recent mean is at least the
fastest step), so only the others are scanned step by step; the sketch's exact min and max make the
screen lossless. Findings carry the job's p50 and p99 step time from the same sketch.

Wasted GPU-hours: the outliers' excess time over the recent mean, summed over ranks, each rank's
times the GPUs it holds (`p01_dataloader_stall.rank_gpu_share_sql`: none for a process without GPU
samples, so a CPU-only run's outliers are reported and charged 0 GPU-hours), in hours.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from itertools import groupby, pairwise
from typing import TYPE_CHECKING, ClassVar

from analyzers.base import PartitionKey
from analyzers.findings import Finding, Severity
from analyzers.quantiles.panes import merged
from analyzers.quantiles.panes import prepare as prepare_sketches
from analyzers.rules._common import fetch, make_finding, r
from analyzers.rules.p01_dataloader_stall import rank_gpu_share_sql, steps_sql

if TYPE_CHECKING:
    import duckdb

    from analyzers.base import JobCatalog
    from analyzers.run.window import Window


def periodic(steps: list[int], max_cv: float) -> bool:
    """True when outlier steps recur at a steady period (at least 3 gaps, spread < max_cv)."""
    gaps = [b - a for a, b in pairwise(steps)]
    if len(gaps) < 3:
        return False
    mean = statistics.fmean(gaps)
    return mean > 0 and statistics.pstdev(gaps) / mean < max_cv


LISTED_STEPS = 50  # outlier steps kept per rank in the evidence (the count is `outliers`)


@dataclass(frozen=True)
class StepOutlierThresholds:
    sigmas: float = 3.0  # SageMaker StepOutlier: stddev = 3
    skip_steps: int = 10  # SageMaker StepOutlier: first 10 steps ignored
    recent_steps: int = 50  # fleetscope: "recent" = the previous 50 steps of the rank
    min_outliers: int = 10  # SageMaker StepOutlier: n_outliers = 10
    periodic_cv: float = 0.1  # fleetscope: spacing varying < 10 % is a schedule, not a stall
    min_excess: float = 0.1  # fleetscope: and 10 % above the mean (steady steps have sd ~ 0)


@dataclass
class StepOutliers:
    name: ClassVar[str] = "step_outliers"
    rule_ids: ClassVar[tuple[str, ...]] = ("P2",)
    rule_names: ClassVar[dict[str, str]] = {"P2": "Step-time outliers"}  # analyzers.rule_cards
    inputs: ClassVar[tuple[str, ...]] = ("step_samples", "gpu_samples")
    partition_by: ClassVar[PartitionKey] = "job"
    thresholds: StepOutlierThresholds = field(default_factory=StepOutlierThresholds)

    def run(
        self, conn: duckdb.DuckDBPyConnection, window: Window, catalog: JobCatalog
    ) -> list[Finding]:
        th = self.thresholds
        sk = prepare_sketches(conn, window)
        step_sql = "SELECT * FROM {} WHERE metric = 'step_time_s' AND job_id IS NOT NULL"
        sketches = merged(conn, step_sql.format(sk.buckets), step_sql.format(sk.panes), ["job_id"])
        steady = [
            str(job)
            for (job,), s in sketches.items()
            if s.max <= (1 + th.min_excess) * s.min and s.min > 0
        ]
        screened = (
            "TRUE"
            if not steady
            else "job_id NOT IN ({})".format(
                ", ".join("'" + j.replace("'", "''") + "'" for j in steady)
            )
        )
        rows = fetch(
            conn,
            f"""
            WITH s AS (SELECT * FROM ({steps_sql(window, th.skip_steps)}) WHERE {screened}),
            held AS ({rank_gpu_share_sql(window, "SELECT * FROM s")}),
            w AS (
                SELECT job_id, host, rank, step, t, step_time_s,
                       avg(step_time_s) OVER recent AS mean_s,
                       stddev_pop(step_time_s) OVER recent AS sd_s,
                       count(*) OVER recent AS n_recent
                FROM s WINDOW recent AS (
                    PARTITION BY job_id, rank ORDER BY step
                    ROWS BETWEEN {int(th.recent_steps)} PRECEDING AND 1 PRECEDING)
            )
            SELECT w.job_id, w.host, rank, step, t, step_time_s, mean_s, held.gpus,
                   held.rank_gpu_share
            FROM w JOIN held ON held.job_id = w.job_id AND held.host = w.host
            WHERE n_recent >= 10 AND step_time_s > mean_s + ? * sd_s AND step_time_s > ? * mean_s
            ORDER BY w.job_id, rank, step
            """,
            [th.sigmas, 1 + th.min_excess],
        )
        findings = []
        for job_id, group in groupby(rows, key=lambda x: x["job_id"]):
            items = list(group)
            by_rank = {
                rank: [x["step"] for x in g] for rank, g in groupby(items, key=lambda x: x["rank"])
            }
            scheduled = all(periodic(steps, th.periodic_cv) for steps in by_rank.values())
            worst_rank = max(by_rank, key=lambda k: len(by_rank[k]))
            if len(by_rank[worst_rank]) < th.min_outliers or scheduled:
                continue
            excess_s = sum(x["step_time_s"] - x["mean_s"] for x in items)
            gpu_excess_s = sum(
                (x["step_time_s"] - x["mean_s"]) * x["rank_gpu_share"] for x in items
            )
            hosts = sorted({x["host"] for x in items})
            sketch = sketches.get((job_id,))
            p50, p99 = sketch.quantiles([0.5, 0.99]).tolist() if sketch else (None, None)
            findings.append(
                make_finding(
                    catalog,
                    window,
                    rule_id="P2",
                    severity=Severity.WARN,
                    job_id=job_id,
                    host=hosts[0] if len(hosts) == 1 else None,
                    gpus=(),
                    start_t=min(x["t"] - x["step_time_s"] for x in items),
                    end_t=max(x["t"] for x in items),
                    title=f"{len(items)} step-time outliers (> {th.sigmas:g} sigma of recent steps)",
                    recommendation=(
                        "Some steps stall far beyond the norm: look for garbage-collection pauses, "
                        "synchronous checkpoint or logging on the step path, data shards of uneven "
                        "size, or a noisy neighbour; capture a trace around one (fleetscope trace)."
                    ),
                    wasted_gpu_hours=gpu_excess_s / 3600.0,
                    estimate_method=(
                        "outlier steps' time above the recent mean, summed over ranks"
                        if gpu_excess_s
                        else "no GPU samples for the job's ranks: a CPU-only process, 0 GPU-hours"
                    ),
                    evidence={
                        "outliers": len(items),
                        # named for what it holds: "outliers 109" beside 50 listed steps read
                        # as a contradiction (issue 31)
                        f"first_{LISTED_STEPS}_outlier_steps_by_rank": {
                            str(k): v[:LISTED_STEPS] for k, v in by_rank.items()
                        },
                        "max_step_s": r(max(x["step_time_s"] for x in items)),
                        "excess_s": r(excess_s, 2),
                        "step_p50_s": r(p50),
                        "step_p99_s": r(p99),
                    },
                    table="step_samples",
                )
            )
        return findings
