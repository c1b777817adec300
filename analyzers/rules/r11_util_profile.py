"""R11 under-utilized / fluctuating GPU, and R12 batch size too small: the utilization profile.

Sources: SageMaker Debugger's LowGPUUtilization rule: p95 utilization below 70 % is under-use;
p95 above 70 % with p5 below 10 % is fluctuating use. SageMaker Debugger's BatchSize rule: p95 CPU,
p95 GPU utilization and p95 GPU memory all below 70 % means the batch is too small. Percentiles are
over the job's judged samples. The rules are independent, as in SageMaker Debugger (a small-batch
job is usually under-utilized too; the ranking counts its hours once). Jobs that did no work (mean
below 0.5 %) are R1/R3's. R12 needs host CPU samples (the job's cgroup, else the host) and stays
silent without them.

Wasted GPU-hours: allocated GPU-hours x (1 - mean utilization / 100), the shared accounting of
collector/simulator/truth.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from analyzers.base import PartitionKey
from analyzers.findings import Finding, Severity
from analyzers.frames import prepare
from analyzers.rules._common import fetch, gpu_with_host_sql, job_rows, make_finding, r

if TYPE_CHECKING:
    import duckdb

    from analyzers.base import JobCatalog, Window


@dataclass(frozen=True)
class UtilProfileThresholds:
    p95_util_pct: float = 70.0  # SageMaker LowGPUUtilization / BatchSize: 70 %
    p5_util_pct: float = 10.0  # SageMaker LowGPUUtilization: fluctuating below 10 %
    p95_cpu_pct: float = 70.0  # SageMaker BatchSize: CPU p95 below 70 %
    p95_memory_frac: float = 0.7  # SageMaker BatchSize: GPU memory p95 below 70 %
    worked_util_pct: float = 0.5  # below this mean the job did no work: R1/R3's business
    min_runtime_s: float = 300.0  # jobstats' 300 s floor, on judged time
    max_host_age_s: float = 300.0


@dataclass
class UtilProfile:
    name: ClassVar[str] = "util_profile"
    rule_ids: ClassVar[tuple[str, ...]] = ("R11", "R12")
    inputs: ClassVar[tuple[str, ...]] = ("gpu_samples", "host_samples")
    partition_by: ClassVar[PartitionKey] = "job"
    thresholds: UtilProfileThresholds = field(default_factory=UtilProfileThresholds)

    def run(
        self, conn: duckdb.DuckDBPyConnection, window: Window, catalog: JobCatalog
    ) -> list[Finding]:
        th = self.thresholds
        frame = prepare(conn, window)
        stats = {
            row["job_id"]: row
            for row in fetch(
                conn,
                f"""
                WITH j AS ({gpu_with_host_sql(frame, window, th.max_host_age_s)})
                SELECT job_id,
                       quantile_cont(util_pct, 0.95) AS util_p95,
                       quantile_cont(util_pct, 0.05) AS util_p05,
                       avg(CASE WHEN util_pct < ? THEN 1.0 ELSE 0.0 END) AS below_p5_share,
                       quantile_cont(cpu_pct, 0.95) AS cpu_p95,
                       quantile_cont(fb_used_mib / nullif(fb_total_mib, 0), 0.95) AS mem_p95
                FROM j GROUP BY job_id
                """,
                [th.p5_util_pct],
            )
        }
        findings = []
        for job in job_rows(conn, frame):
            s = stats.get(job.job_id)
            util = job.util_mean
            if s is None or util is None or util < th.worked_util_pct:
                continue
            if job.warm_h * 3600 <= th.min_runtime_s:
                continue
            p95, p05, cpu, mem = s["util_p95"], s["util_p05"], s["cpu_p95"], s["mem_p95"]
            evidence = {
                "util_p95_pct": r(p95, 2),
                "util_p05_pct": r(p05, 2),
                "util_mean_pct": r(util, 2),
                "cpu_p95_pct": r(cpu, 2),
                "memory_p95_frac": r(mem),
            }
            common: dict[str, Any] = {
                "job_id": job.job_id,
                "host": job.host,
                "gpus": job.gpu_labels,
                "start_t": job.first_t,
                "end_t": job.last_t,
                "evidence": evidence,
            }
            headroom_h = job.alloc_h * max(0.0, 1 - util / 100)
            headroom_method = "allocated GPU-hours x (1 - mean utilization / 100 %)"
            if p95 < th.p95_util_pct and cpu is not None and mem is not None:
                small_batch = cpu < th.p95_cpu_pct and mem < th.p95_memory_frac
            else:
                small_batch = False
            if small_batch:
                findings.append(
                    make_finding(
                        catalog,
                        window,
                        rule_id="R12",
                        severity=Severity.WARN,
                        title=(
                            f"batch too small: p95 GPU {p95:.0f} %, CPU {cpu:.0f} %, "
                            f"memory {mem:.0%} all below 70 %"
                        ),
                        recommendation=(
                            "GPU, CPU and GPU memory all have head-room: increase the batch size "
                            "per GPU (scale the learning rate with it) or use fewer GPUs."
                        ),
                        wasted_gpu_hours=headroom_h,
                        estimate_method=headroom_method,
                        table="gpu_samples+host_samples",
                        **common,
                    )
                )
            if p95 < th.p95_util_pct:
                findings.append(
                    make_finding(
                        catalog,
                        window,
                        rule_id="R11",
                        severity=Severity.WARN,
                        title=f"under-utilized: p95 GPU utilization {p95:.0f} % (< 70 %)",
                        recommendation=(
                            "The GPU never runs near capacity. Look for a bottleneck outside the "
                            "GPU (input, host-device copies, synchronization) with a trace."
                        ),
                        wasted_gpu_hours=headroom_h,
                        estimate_method=headroom_method,
                        scope="under-utilized",
                        **common,
                    )
                )
            elif p05 < th.p5_util_pct:
                findings.append(
                    make_finding(
                        catalog,
                        window,
                        rule_id="R11",
                        severity=Severity.INFO,
                        title=f"fluctuating: p95 {p95:.0f} % but p5 {p05:.0f} % GPU utilization",
                        recommendation=(
                            "Utilization swings between busy and idle: look for periodic stalls "
                            "(data loading bursts, synchronous checkpoints, evaluation on one "
                            "rank) and overlap them with compute."
                        ),
                        wasted_gpu_hours=headroom_h,
                        estimate_method=headroom_method,
                        scope="fluctuating",
                        **common,
                    )
                )
        return findings
