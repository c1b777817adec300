"""R1, zero utilization: an allocated GPU that did no work at all.

Source: jobstats (Princeton Research Computing) flags every allocated GPU whose job-mean
utilization is 0 % once the job has run more than 300 s. We judge each (job, host, GPU) over the
window; "0" is a mean below 0.5 % (the shared truth's "did no work": exporters round, and an idle
GPU can show a stray 1 %).

Wasted GPU-hours: every allocated hour of the idle GPUs (the fix, requesting only the GPUs the code
uses, returns all of them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby
from typing import TYPE_CHECKING, ClassVar

from analyzers.accounting.frames import prepare
from analyzers.base import PartitionKey
from analyzers.findings import Finding, Severity
from analyzers.rules._common import fetch, make_finding

if TYPE_CHECKING:
    import duckdb

    from analyzers.base import JobCatalog
    from analyzers.run.window import Window


@dataclass(frozen=True)
class ZeroUtilThresholds:
    min_runtime_s: float = 300.0  # jobstats: only GPUs of jobs that ran longer than 300 s
    zero_util_pct: float = 0.5  # "0 %": below half a percent (exporters round; see the docstring)


@dataclass
class ZeroUtilization:
    name: ClassVar[str] = "zero_util"
    rule_ids: ClassVar[tuple[str, ...]] = ("R1",)
    rule_names: ClassVar[dict[str, str]] = {"R1": "Zero utilization"}  # analyzers.rule_cards
    inputs: ClassVar[tuple[str, ...]] = ("gpu_samples",)
    partition_by: ClassVar[PartitionKey] = "job"
    thresholds: ZeroUtilThresholds = field(default_factory=ZeroUtilThresholds)

    def run(
        self, conn: duckdb.DuckDBPyConnection, window: Window, catalog: JobCatalog
    ) -> list[Finding]:
        frame = prepare(conn, window)
        rows = fetch(
            conn,
            f"""SELECT job_id, host, gpu, alloc_h, first_t, last_t, n_samples FROM {frame.jobgpu}
                WHERE util_mean_all < ? AND alloc_h * 3600 > ?
                ORDER BY job_id, host, gpu""",
            [self.thresholds.zero_util_pct, self.thresholds.min_runtime_s],
        )
        findings = []
        for (job_id, host), group in groupby(rows, key=lambda r: (r["job_id"], r["host"])):
            gpus = list(group)
            labels = [g["gpu"] for g in gpus]
            idle_h = sum(g["alloc_h"] for g in gpus)
            findings.append(
                make_finding(
                    catalog,
                    window,
                    rule_id="R1",
                    severity=Severity.CRITICAL,
                    job_id=job_id,
                    host=host,
                    gpus=labels,
                    start_t=min(g["first_t"] for g in gpus),
                    end_t=max(g["last_t"] for g in gpus),
                    title=f"{len(labels)} allocated GPU(s) on {host} at 0 % utilization",
                    recommendation=(
                        "These GPUs did no work for the whole job: request only as many GPUs as the "
                        "code uses (check CUDA_VISIBLE_DEVICES, the DDP world size, or that the "
                        "framework sees a GPU at all), or cancel the job."
                    ),
                    wasted_gpu_hours=idle_h,
                    estimate_method="all allocated hours of the GPUs at 0 % utilization",
                    evidence={
                        "idle_gpus": labels,
                        "util_mean_pct": 0.0,
                        "allocated_gpu_hours": round(idle_h, 4),
                        "samples_n": sum(int(g["n_samples"]) for g in gpus),
                    },
                )
            )
        return findings
