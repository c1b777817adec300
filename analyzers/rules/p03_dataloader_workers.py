"""P3, DataLoader worker count out of proportion to the host's CPU cores.

Source: SageMaker Debugger's Dataloader rule: worker processes below 70 % or above 200 % of the CPU
cores. Workers are summed over the job's ranks on a host (each rank has its own DataLoader); cores
come from the host samples: the job's cgroup where reported, else the host's cores times the job's
share of the host's GPUs (in the window's gpu_samples), the CPUs a GPU scheduler allots per GPU
(Slurm's `DefCpuPerGPU`, a Kubernetes pod's CPU request in proportion): a one-GPU job on an
eight-GPU, 96-core host is judged against 12 cores, not 96. The data-wait share is in the
evidence: too few workers matter most when P1 also fires.

Wasted GPU-hours: 0: the waste of a stalled loader is counted once, by P1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from analyzers.accounting.frames import ts_literal
from analyzers.base import PartitionKey
from analyzers.findings import Finding, Severity
from analyzers.rules._common import fetch, make_finding, r
from analyzers.rules.p01_dataloader_stall import steps_sql

if TYPE_CHECKING:
    import duckdb

    from analyzers.base import JobCatalog
    from analyzers.run.window import Window


@dataclass(frozen=True)
class WorkerThresholds:
    min_cores_share: float = 0.7  # SageMaker Dataloader: < 70 % of cores
    max_cores_share: float = 2.0  # SageMaker Dataloader: > 200 % of cores
    skip_steps: int = 10


@dataclass
class DataLoaderWorkers:
    name: ClassVar[str] = "dataloader_workers"
    rule_ids: ClassVar[tuple[str, ...]] = ("P3",)
    rule_names: ClassVar[dict[str, str]] = {"P3": "Data-loader workers"}  # analyzers.rule_cards
    inputs: ClassVar[tuple[str, ...]] = ("step_samples", "host_samples", "gpu_samples")
    partition_by: ClassVar[PartitionKey] = "job"
    thresholds: WorkerThresholds = field(default_factory=WorkerThresholds)

    def run(
        self, conn: duckdb.DuckDBPyConnection, window: Window, catalog: JobCatalog
    ) -> list[Finding]:
        th = self.thresholds
        in_window = f"ts >= {ts_literal(window.start)} AND ts < {ts_literal(window.end)}"
        rows = fetch(
            conn,
            f"""
            WITH s AS ({steps_sql(window, th.skip_steps)}),
            per_rank AS (
                SELECT job_id, host, rank, median(dataloader_workers) AS workers,
                       sum(data_wait_s) AS wait_s, sum(step_time_s) AS step_s,
                       min(t - step_time_s) AS t0, max(t) AS t1
                FROM s WHERE dataloader_workers IS NOT NULL GROUP BY ALL
            ), per_host AS (
                SELECT job_id, host, sum(workers) AS workers, count(*) AS ranks,
                       sum(wait_s) / sum(step_s) AS wait_share, min(t0) AS t0, max(t1) AS t1
                FROM per_rank GROUP BY ALL
            ), cores AS (
                SELECT host, job_id, median(cpu_cores) AS cores FROM host_samples
                WHERE {in_window} AND cpu_cores > 0 GROUP BY ALL
            ), host_gpus AS (
                SELECT host, count(DISTINCT gpu_index) AS gpus FROM gpu_samples
                WHERE {in_window} GROUP BY ALL
            ), job_gpus AS (
                SELECT host, job_id, count(DISTINCT gpu_index) AS gpus FROM gpu_samples
                WHERE {in_window} AND job_id IS NOT NULL GROUP BY ALL
            )
            SELECT p.*, cj.cores AS cgroup_cores, ch.cores AS host_cores, jg.gpus AS job_gpus,
                   hg.gpus AS host_gpus,
                   COALESCE(cj.cores, ch.cores * coalesce(jg.gpus / hg.gpus, 1.0)) AS cores
            FROM per_host p
            LEFT JOIN cores cj ON cj.host = p.host AND cj.job_id = p.job_id
            LEFT JOIN cores ch ON ch.host = p.host AND ch.job_id IS NULL
            LEFT JOIN job_gpus jg ON jg.host = p.host AND jg.job_id = p.job_id
            LEFT JOIN host_gpus hg ON hg.host = p.host
            WHERE COALESCE(cj.cores, ch.cores) IS NOT NULL
            ORDER BY p.job_id, p.host
            """,
        )
        findings = []
        for row in rows:
            ratio = float(row["workers"]) / float(row["cores"])
            wait = float(row["wait_share"] or 0.0)
            too_few = ratio < th.min_cores_share
            too_many = ratio > th.max_cores_share
            if not (too_few or too_many):
                continue
            suggested = max(1, int(th.min_cores_share * row["cores"] / row["ranks"] + 0.999))
            findings.append(
                make_finding(
                    catalog,
                    window,
                    rule_id="P3",
                    severity=Severity.INFO,
                    job_id=row["job_id"],
                    host=row["host"],
                    gpus=(),
                    start_t=row["t0"],
                    end_t=row["t1"],
                    title=(
                        f"{row['workers']:.0f} DataLoader workers for {row['cores']:.0f} CPU cores "
                        f"({ratio:.0%})"
                    ),
                    recommendation=(
                        f"Use about {suggested} workers per rank (num_workers) so the loaders use "
                        "the host's cores while the job waits for data."
                        if too_few
                        else "Workers oversubscribe the CPU and fight each other and the training "
                        f"process: lower num_workers to about {suggested} per rank."
                    ),
                    wasted_gpu_hours=0.0,
                    estimate_method="advice: a stalled loader's waste is counted by P1",
                    evidence={
                        "workers": float(row["workers"]),
                        "cpu_cores": float(row["cores"]),
                        "workers_per_core": r(ratio),
                        **_share_of_host(row),
                        "data_wait_share": r(wait),
                        "ranks_on_host": int(row["ranks"]),
                    },
                    table="step_samples+host_samples",
                )
            )
        return findings


def _share_of_host(row: dict[str, Any]) -> dict[str, float | int]:
    """How `cpu_cores` was reached when it is the job's GPU share of the whole host's cores."""
    if row["cgroup_cores"] is not None or row["job_gpus"] is None or row["host_gpus"] is None:
        return {}
    if row["job_gpus"] == row["host_gpus"]:
        return {}
    return {
        "host_cpu_cores": float(row["host_cores"]),
        "job_gpus_on_host": int(row["job_gpus"]),
        "host_gpus": int(row["host_gpus"]),
    }
