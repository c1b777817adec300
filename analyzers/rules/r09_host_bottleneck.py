"""R9 CPU bottleneck and R10 I/O bottleneck: the GPU waits while the host is saturated.

Source: SageMaker Debugger's CPUBottleneck and IOBottleneck rules: GPU utilization below 10 % while
CPU utilization is above 90 % (CPU) or I/O wait above 50 % (I/O), in more than 50 % of the samples.
Each judged GPU sample is paired with the latest host sample at or before it (the job's cgroup when
reported, else the whole host); GPU samples with no host sample within `max_host_age_s` are not
counted. When both conditions hold for a job, the larger share names the rule.

Wasted GPU-hours: allocated GPU-hours x the share of samples in the bottleneck: the GPU time spent
waiting on the host.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from analyzers.accounting.frames import prepare
from analyzers.base import PartitionKey
from analyzers.findings import Finding, Severity
from analyzers.rules._common import fetch, gpu_with_host_sql, job_rows, make_finding, r

if TYPE_CHECKING:
    import duckdb

    from analyzers.base import JobCatalog
    from analyzers.run.window import Window


@dataclass(frozen=True)
class HostBottleneckThresholds:
    gpu_util_below_pct: float = 10.0  # SageMaker Debugger: GPU utilization < 10 %
    cpu_above_pct: float = 90.0  # SageMaker CPUBottleneck: CPU > 90 %
    iowait_above_pct: float = 50.0  # SageMaker IOBottleneck: I/O wait > 50 %
    min_sample_share: float = 0.5  # SageMaker Debugger: in more than 50 % of samples
    max_host_age_s: float = 300.0  # pair a GPU sample only with a host sample this recent


@dataclass
class HostBottleneck:
    name: ClassVar[str] = "host_bottleneck"
    rule_ids: ClassVar[tuple[str, ...]] = ("R9", "R10")
    rule_names: ClassVar[dict[str, str]] = {
        "R9": "CPU bottleneck",
        "R10": "I/O bottleneck",
    }  # analyzers.rule_cards
    inputs: ClassVar[tuple[str, ...]] = ("gpu_samples", "host_samples")
    partition_by: ClassVar[PartitionKey] = "job"
    thresholds: HostBottleneckThresholds = field(default_factory=HostBottleneckThresholds)

    def run(
        self, conn: duckdb.DuckDBPyConnection, window: Window, catalog: JobCatalog
    ) -> list[Finding]:
        th = self.thresholds
        frame = prepare(conn, window)
        shares = {
            row["job_id"]: row
            for row in fetch(
                conn,
                f"""
                WITH j AS ({gpu_with_host_sql(frame, window, th.max_host_age_s)})
                SELECT job_id, count(*) AS n,
                       avg(CASE WHEN util_pct < ? AND cpu_pct > ? THEN 1.0 ELSE 0.0 END) AS cpu_share,
                       avg(CASE WHEN util_pct < ? AND iowait_pct > ? THEN 1.0 ELSE 0.0 END)
                           AS io_share,
                       avg(cpu_pct) AS cpu_mean, avg(iowait_pct) AS iowait_mean
                FROM j WHERE cpu_pct IS NOT NULL GROUP BY job_id
                """,
                [
                    th.gpu_util_below_pct,
                    th.cpu_above_pct,
                    th.gpu_util_below_pct,
                    th.iowait_above_pct,
                ],
            )
        }
        findings = []
        for job in job_rows(conn, frame):
            row = shares.get(job.job_id)
            if row is None:
                continue
            cpu_share, io_share = float(row["cpu_share"]), float(row["io_share"])
            if max(cpu_share, io_share) <= th.min_sample_share:
                continue
            is_cpu = cpu_share >= io_share
            share = cpu_share if is_cpu else io_share
            findings.append(
                make_finding(
                    catalog,
                    window,
                    rule_id="R9" if is_cpu else "R10",
                    severity=Severity.WARN,
                    job_id=job.job_id,
                    host=job.host,
                    gpus=job.gpu_labels,
                    start_t=job.first_t,
                    end_t=job.last_t,
                    title=(
                        f"GPU < {th.gpu_util_below_pct:.0f} % while "
                        + (
                            f"CPU > {th.cpu_above_pct:.0f} %"
                            if is_cpu
                            else f"I/O wait > {th.iowait_above_pct:.0f} %"
                        )
                        + f" in {share:.0%} of samples"
                    ),
                    recommendation=(
                        "The CPU cannot keep up: move preprocessing to the GPU (DALI, torchvision "
                        "v2 on tensors), raise DataLoader num_workers, or cache decoded samples."
                        if is_cpu
                        else "Reads stall the job: stage the data set on local NVMe, use a "
                        "streaming format (WebDataset, TFRecord) with larger files, and prefetch."
                    ),
                    wasted_gpu_hours=job.alloc_h * share,
                    estimate_method="allocated GPU-hours x share of samples in the bottleneck",
                    evidence={
                        "bottleneck_sample_share": r(share),
                        "threshold_share": th.min_sample_share,
                        "cpu_pct_mean": r(row["cpu_mean"], 2),
                        "iowait_pct_mean": r(row["iowait_mean"], 2),
                        "util_mean_pct": r(job.util_mean, 2),
                        "samples_n": int(row["n"]),
                    },
                    table="gpu_samples+host_samples",
                )
            )
        return findings
