"""R4, low efficiency per user: a user whose GPU-hours in the window are mostly unused.

Source: job_defense_shield (Princeton Research Computing): user-mean GPU efficiency below 25 %
with more than 50 GPU-hours in the window is reported, against a 50 % target. Efficiency is the
user's utilization weighted by each job's judged GPU-hours; users come from the job catalog (jobs
it does not know are grouped under no user and never reported).

Wasted GPU-hours: 0 on purpose. This is a roll-up of the user's jobs, whose waste the per-job rules
(R1-R3, R5...) already count; the ranking would count it twice. The hours the user would win back
at the target are in the evidence (`recoverable_at_target_gpu_hours`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from analyzers.accounting.frames import prepare
from analyzers.base import PartitionKey
from analyzers.findings import Finding, Severity
from analyzers.rules._common import job_rows, make_finding, r
from analyzers.run.window import Window

if TYPE_CHECKING:
    import duckdb

    from analyzers.base import JobCatalog


@dataclass(frozen=True)
class UserEfficiencyThresholds:
    max_efficiency_pct: float = 25.0  # job_defense_shield: report users below 25 %
    min_gpu_hours: float = 50.0  # job_defense_shield: only users with > 50 GPU-hours
    target_pct: float = 50.0  # job_defense_shield's target


@dataclass
class UserEfficiency:
    name: ClassVar[str] = "user_efficiency"
    rule_ids: ClassVar[tuple[str, ...]] = ("R4",)
    rule_names: ClassVar[dict[str, str]] = {"R4": "Low efficiency per user"}  # analyzers.rule_cards
    inputs: ClassVar[tuple[str, ...]] = ("gpu_samples",)
    partition_by: ClassVar[PartitionKey] = "none"
    thresholds: UserEfficiencyThresholds = field(default_factory=UserEfficiencyThresholds)

    def run(
        self, conn: duckdb.DuckDBPyConnection, window: Window, catalog: JobCatalog
    ) -> list[Finding]:
        return self.combine(self.partial(conn, window), window, catalog)

    def partial(self, conn: duckdb.DuckDBPyConnection, window: Window) -> list[dict[str, Any]]:
        """The window's jobs (a part of the fleet's, in fleet mode: a job runs in one cluster)."""
        whole = Window(window.start, window.end)  # every job: a user's jobs span partitions
        return [
            {
                "job_id": job.job_id,
                "alloc_h": job.alloc_h,
                "util_mean_all": job.util_mean_all,
                "first_t": job.first_t,
                "last_t": job.last_t,
            }
            for job in job_rows(conn, prepare(conn, whole))
        ]

    def combine(
        self, rows: Sequence[Mapping[str, Any]], window: Window, catalog: JobCatalog
    ) -> list[Finding]:
        """Per-user totals over every part's jobs, in job order (the sums add up the same way
        whatever the parts), then the findings."""
        th = self.thresholds
        totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, float("inf"), 0.0])
        jobs: dict[str, list[str]] = defaultdict(list)
        for job in sorted(rows, key=lambda j: str(j["job_id"])):
            info = catalog.get(job["job_id"])
            if info is None or not info.user or job["util_mean_all"] is None:
                continue
            t = totals[info.user]
            t[0] += job["alloc_h"]
            t[1] += job["alloc_h"] * job["util_mean_all"]
            t[2] += 1
            t[3] = min(t[3], job["first_t"])
            t[4] = max(t[4], job["last_t"])
            jobs[info.user].append(job["job_id"])
        findings = []
        for user, (gpu_h, util_h, n_jobs, first_t, last_t) in sorted(totals.items()):
            efficiency = util_h / gpu_h if gpu_h else 0.0
            if gpu_h <= th.min_gpu_hours or efficiency >= th.max_efficiency_pct:
                continue
            finding = make_finding(
                catalog,
                window,
                rule_id="R4",
                severity=Severity.WARN,
                job_id=None,
                host=None,
                gpus=(),
                start_t=first_t,
                end_t=last_t,
                title=f"user {user}: {efficiency:.1f} % mean GPU utilization over {gpu_h:.0f} GPU-h",
                recommendation=(
                    f"Most of {user}'s GPU time is idle across {int(n_jobs)} job(s). Review the "
                    "per-job findings with them; the usual fixes are fewer GPUs per job, a bigger "
                    "batch, and not holding GPUs in interactive sessions."
                ),
                wasted_gpu_hours=0.0,
                estimate_method="roll-up: the user's per-job findings carry the waste",
                evidence={
                    "efficiency_pct": r(efficiency, 2),
                    "gpu_hours": r(gpu_h),
                    "jobs": sorted(jobs[user]),
                    "recoverable_at_target_gpu_hours": r(
                        gpu_h * max(0.0, 1 - efficiency / th.target_pct)
                    ),
                },
                scope=f"user:{user}",
            )
            findings.append(finding.with_job_info(user=user, team=finding.team, job_name=None))
        return findings
