"""R2, low GPU utilization of a batch job.

Source: jobstats (Princeton Research Computing) reports job-mean GPU utilization and colours it red
at <= 15 % and warns below 25 %. A job that did no work (mean below 0.5 %) belongs to R1/R3.

Wasted GPU-hours: allocated GPU-hours x (1 - mean utilization / 100): the idle share of the
allocation (the shared accounting of analyzers/accounting/sql.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from analyzers.accounting.frames import prepare
from analyzers.base import PartitionKey
from analyzers.findings import Finding, Severity
from analyzers.rules._common import job_rows, make_finding, r

if TYPE_CHECKING:
    import duckdb

    from analyzers.base import JobCatalog
    from analyzers.run.window import Window


@dataclass(frozen=True)
class LowUtilThresholds:
    red_util_pct: float = 15.0  # jobstats: red at <= 15 %
    warn_util_pct: float = 25.0  # jobstats: warning below 25 %
    worked_util_pct: float = 0.5  # below this mean the job did no work: R1/R3's business
    min_runtime_s: float = 300.0  # jobstats' 300 s floor, applied to the judged (warm) time


@dataclass
class LowUtilization:
    name: ClassVar[str] = "low_util"
    rule_ids: ClassVar[tuple[str, ...]] = ("R2",)
    rule_names: ClassVar[dict[str, str]] = {"R2": "Low utilization"}  # analyzers.rule_cards
    inputs: ClassVar[tuple[str, ...]] = ("gpu_samples",)
    partition_by: ClassVar[PartitionKey] = "job"
    thresholds: LowUtilThresholds = field(default_factory=LowUtilThresholds)

    def run(
        self, conn: duckdb.DuckDBPyConnection, window: Window, catalog: JobCatalog
    ) -> list[Finding]:
        th = self.thresholds
        findings = []
        for job in job_rows(conn, prepare(conn, window)):
            util = job.util_mean
            if util is None or job.warm_h * 3600 <= th.min_runtime_s or util < th.worked_util_pct:
                continue
            if util >= th.warn_util_pct:
                continue
            red = util <= th.red_util_pct
            wasted = job.alloc_h * max(0.0, 1.0 - util / 100.0)
            findings.append(
                make_finding(
                    catalog,
                    window,
                    rule_id="R2",
                    severity=Severity.CRITICAL if red else Severity.WARN,
                    job_id=job.job_id,
                    host=job.host,
                    gpus=job.gpu_labels,
                    start_t=job.first_t,
                    end_t=job.last_t,
                    title=f"job-mean GPU utilization {util:.1f} % over {len(job.gpus)} GPU(s)",
                    recommendation=(
                        "The GPUs are mostly waiting. Profile one step (fleetscope trace) to see "
                        "whether input, CPU work or synchronization starves them; use fewer GPUs "
                        "or a larger batch per GPU (job_defense_shield aims at 50 %)."
                    ),
                    wasted_gpu_hours=wasted,
                    estimate_method="allocated GPU-hours x (1 - mean utilization / 100 %)",
                    evidence={
                        "util_mean_pct": r(util, 2),
                        "threshold_pct": th.red_util_pct if red else th.warn_util_pct,
                        "allocated_gpu_hours": r(job.alloc_h),
                        "hosts": list(job.hosts),
                    },
                )
            )
        return findings
