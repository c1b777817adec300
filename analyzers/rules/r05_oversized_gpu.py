"""R5, GPU too big / should share: a long job that uses a small part of a whole GPU.

Source: job_defense_shield and jobstats (Princeton Research Computing): utilization < 20 %, GPU
memory < 10 GB and more than 24 GPU-hours: suggest a MIG slice, a smaller GPU, or co-location
(MPS). Jobs already on a MIG slice are not judged. A job's GPU-hours are counted over the
window plus `lookback_days` before it (a one-GPU job cannot reach 24 GPU-hours inside one day's
bucket), from its sample count times the median sample interval.

Wasted GPU-hours: allocated GPU-hours x (1 - mean utilization / 100), the shared accounting of
analyzers/accounting/sql.py. The recommendation names the smallest MIG slice (in sevenths of a
GPU, A100/H100 profiles 1g..7g) covering the job's p95 utilization and peak memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, ClassVar

from analyzers.accounting.frames import prepare, ts_literal
from analyzers.base import PartitionKey
from analyzers.findings import Finding, Severity
from analyzers.rules._common import fetch, job_rows, make_finding, r

if TYPE_CHECKING:
    import duckdb

    from analyzers.base import JobCatalog
    from analyzers.run.window import Window

DEFAULT_GPU_MEMORY_MIB = 81920.0  # when the exporter reports no free memory: an 80 GB part


@dataclass(frozen=True)
class OversizedThresholds:
    max_util_pct: float = 20.0  # job_defense_shield: utilization below 20 %
    max_memory_mib: float = 10240.0  # job_defense_shield: GPU memory below 10 GB
    min_gpu_hours: float = 24.0  # job_defense_shield: more than 24 GPU-hours
    lookback_days: float = 7.0  # fleetscope: how far back a job's GPU-hours are counted


@dataclass
class OversizedGpu:
    name: ClassVar[str] = "oversized_gpu"
    rule_ids: ClassVar[tuple[str, ...]] = ("R5",)
    rule_names: ClassVar[dict[str, str]] = {"R5": "GPU too big for the job"}  # analyzers.rule_cards
    inputs: ClassVar[tuple[str, ...]] = ("gpu_samples",)
    partition_by: ClassVar[PartitionKey] = "job"
    thresholds: OversizedThresholds = field(default_factory=OversizedThresholds)

    def run(
        self, conn: duckdb.DuckDBPyConnection, window: Window, catalog: JobCatalog
    ) -> list[Finding]:
        th = self.thresholds
        frame = prepare(conn, window)
        p95 = {
            row["job_id"]: row["p95"]
            for row in fetch(
                conn,
                f"""SELECT job_id, quantile_cont(util_pct, 0.95) AS p95 FROM {frame.gpu}
                    WHERE in_window AND warm GROUP BY job_id""",
            )
        }
        findings = []
        candidates = []
        for job in job_rows(conn, frame):
            util = job.util_mean
            if util is None or job.mig or job.fb_used_max_mib is None:
                continue
            if util >= th.max_util_pct or job.fb_used_max_mib >= th.max_memory_mib:
                continue
            if util < 0.5:  # did no work: R1/R3's business
                continue
            candidates.append(job)
        totals = self._job_gpu_hours(conn, window, [j.job_id for j in candidates])
        for job in candidates:
            util = job.util_mean
            assert util is not None and job.fb_used_max_mib is not None
            if max(totals.get(job.job_id, 0.0), job.alloc_h) <= th.min_gpu_hours:
                continue
            total = job.fb_total_mib or DEFAULT_GPU_MEMORY_MIB
            need = max((p95.get(job.job_id) or util) / 100.0, job.fb_used_max_mib / total)
            sevenths = min(7, max(1, math.ceil(need * 7 - 1e-9)))
            wasted = job.alloc_h * (1 - util / 100)
            findings.append(
                make_finding(
                    catalog,
                    window,
                    rule_id="R5",
                    severity=Severity.WARN,
                    job_id=job.job_id,
                    host=job.host,
                    gpus=job.gpu_labels,
                    start_t=job.first_t,
                    end_t=job.last_t,
                    title=(
                        f"{util:.0f} % utilization and {job.fb_used_max_mib / 1024:.1f} GiB peak "
                        f"memory on whole GPU(s) for {job.alloc_h:.0f} GPU-h"
                    ),
                    recommendation=(
                        f"This job fits a {sevenths}g MIG slice: run it on a MIG instance or a "
                        "smaller GPU, or share the GPU with other jobs (MPS, time-slicing)."
                    ),
                    wasted_gpu_hours=wasted,
                    estimate_method="allocated GPU-hours x (1 - mean utilization / 100 %)",
                    evidence={
                        "util_mean_pct": r(util, 2),
                        "util_p95_pct": r(p95.get(job.job_id), 2),
                        "fb_used_max_mib": r(job.fb_used_max_mib, 1),
                        "allocated_gpu_hours": r(job.alloc_h),
                        "job_gpu_hours_lookback": r(totals.get(job.job_id)),
                        "mig_slice_sevenths": sevenths,
                    },
                )
            )
        return findings

    def _job_gpu_hours(
        self, conn: duckdb.DuckDBPyConnection, window: Window, job_ids: list[str]
    ) -> dict[str, float]:
        if not job_ids:
            return {}
        lo = window.start - timedelta(days=self.thresholds.lookback_days)
        rows = fetch(
            conn,
            f"""
            WITH s AS (
                SELECT job_id, host, gpu_index, mig_instance_id, epoch(ts) AS t FROM gpu_samples
                WHERE ts >= {ts_literal(lo)} AND ts < {ts_literal(window.end)}
                  AND list_contains(?, job_id)
            ), g AS (
                SELECT job_id, lead(t) OVER (PARTITION BY job_id, host, gpu_index, mig_instance_id
                                             ORDER BY t) - t AS gap FROM s
            )
            SELECT job_id, count(*) * median(gap) / 3600.0 AS gpu_h FROM g GROUP BY job_id
            """,
            [job_ids],
        )
        return {row["job_id"]: float(row["gpu_h"] or 0.0) for row in rows}
