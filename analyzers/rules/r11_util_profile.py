"""R11 under-utilized / fluctuating GPU, and R12 batch size too small: the utilization profile.

Sources: SageMaker Debugger's LowGPUUtilization rule: p95 utilization below 70 % is under-use;
p95 above 70 % with p5 below 10 % is fluctuating use. SageMaker Debugger's BatchSize rule: p95 CPU,
p95 GPU utilization and p95 GPU memory all below 70 % means the batch is too small. Percentiles are
over the job's judged samples, read from the window's quantile sketches (analyzers.quantiles.panes: within
the sketch's 1 % value error, exact for integer percentages; a job's start-up is skipped by whole
panes). CPU is the job's cgroup rows, else the host-wide rows of the panes in which the job had
GPU samples on that host or up to `max_host_age_s` after. The rules are independent, as in SageMaker Debugger (a small-batch
job is usually under-utilized too; the ranking counts its hours once). Jobs that did no work (mean
below 0.5 %) are R1/R3's. R12 needs host CPU samples (the job's cgroup, else the host) and stays
silent without them.

Wasted GPU-hours: allocated GPU-hours x (1 - mean utilization / 100), the shared accounting of
analyzers/accounting/sql.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from analyzers.accounting.frames import prepare
from analyzers.base import PartitionKey
from analyzers.findings import Finding, Severity
from analyzers.quantiles.panes import SketchFrame, merged
from analyzers.quantiles.panes import prepare as prepare_sketches
from analyzers.rules._common import job_rows, make_finding, r

if TYPE_CHECKING:
    import duckdb

    from analyzers.accounting.frames import Frame
    from analyzers.base import JobCatalog
    from analyzers.run.window import Window


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
    rule_names: ClassVar[dict[str, str]] = {
        "R11": "Under-utilized or fluctuating",
        "R12": "Batch size too small",
    }  # analyzers.rule_cards
    inputs: ClassVar[tuple[str, ...]] = ("gpu_samples", "host_samples")
    partition_by: ClassVar[PartitionKey] = "job"
    thresholds: UtilProfileThresholds = field(default_factory=UtilProfileThresholds)

    def run(
        self, conn: duckdb.DuckDBPyConnection, window: Window, catalog: JobCatalog
    ) -> list[Finding]:
        th = self.thresholds
        frame = prepare(conn, window)
        stats = _sketch_stats(conn, frame, prepare_sketches(conn, window), th.max_host_age_s)
        findings = []
        for job in job_rows(conn, frame):
            s = stats.get(job.job_id)
            util = job.util_mean
            if s is None or util is None or util < th.worked_util_pct:
                continue
            if job.warm_h * 3600 <= th.min_runtime_s:
                continue
            p95, p05 = s.get("util_p95"), s.get("util_p05")
            cpu, mem = s.get("cpu_p95"), s.get("mem_p95")
            if p95 is None or p05 is None:
                continue
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


def _sketch_stats(
    conn: duckdb.DuckDBPyConnection, frame: Frame, sk: SketchFrame, max_host_age_s: float
) -> dict[str, dict[str, float]]:
    """Per job: p95 and p5 utilization, p95 memory fraction and p95 CPU, from merged sketches."""
    warm = f"""SELECT job_id, min(t) FILTER (WHERE warm) AS warm_t FROM {frame.gpu}
               WHERE in_window GROUP BY job_id"""
    judged = f"epoch(x.pane_start) + {sk.pane_s} > w.warm_t"

    def rows(table: str, metric: str) -> str:
        return f"""SELECT x.* FROM {table} x JOIN ({warm}) w USING (job_id)
                   WHERE x.metric = '{metric}' AND {judged}"""

    def host_rows(table: str) -> str:
        gpu_panes = (
            f"""SELECT DISTINCT job_id, host, pane_start FROM ({rows(sk.panes, "gpu_util_pct")})"""
        )
        back = int(max_host_age_s // sk.pane_s) + 1  # panes a host sample may lead by
        reach = f"""SELECT DISTINCT job_id, host,
                       pane_start - to_seconds({sk.pane_s} * unnest(range({back}))) AS pane_start
                    FROM ({gpu_panes})"""
        matched = f"""SELECT DISTINCT g.job_id, h.host, h.pane_start
            FROM ({reach}) g JOIN {sk.panes} h ON h.host = g.host AND h.pane_start = g.pane_start
             AND h.metric = 'cpu_pct' AND h.job_id IS NULL"""
        own = f"SELECT DISTINCT job_id FROM {sk.panes} WHERE metric = 'cpu_pct' AND job_id IS NOT NULL"
        return f"""SELECT m.job_id, x.* EXCLUDE (job_id) FROM {table} x
                   JOIN ({matched}) m ON x.host = m.host AND x.pane_start = m.pane_start
                   WHERE x.metric = 'cpu_pct' AND x.job_id IS NULL
                     AND m.job_id NOT IN ({own})"""

    out: dict[str, dict[str, float]] = {}
    plans = (
        (
            rows(sk.buckets, "gpu_util_pct"),
            rows(sk.panes, "gpu_util_pct"),
            {"util_p95": 0.95, "util_p05": 0.05},
        ),
        (rows(sk.buckets, "fb_used_frac"), rows(sk.panes, "fb_used_frac"), {"mem_p95": 0.95}),
        (rows(sk.buckets, "cpu_pct"), rows(sk.panes, "cpu_pct"), {"cpu_p95": 0.95}),
        (host_rows(sk.buckets), host_rows(sk.panes), {"cpu_p95": 0.95}),
    )
    for buckets_sql, panes_sql, wanted in plans:
        for (job_id,), sketch in merged(conn, buckets_sql, panes_sql, ["job_id"]).items():
            values = sketch.quantiles(list(wanted.values())).tolist()
            out.setdefault(str(job_id), {}).update(zip(wanted, values, strict=True))
    return out
