"""R1, zero utilization: an allocated GPU that did no work at all.

Source: jobstats (Princeton Research Computing) flags every allocated GPU whose job-mean
utilization is 0 % once the job has run more than 300 s. We judge each (job, host, GPU) over the
window; "0" is a mean below 0.5 % (the shared truth's "did no work": exporters round, and an idle
GPU can show a stray 1 %).

A GPU whose samples began shortly before the window's start (an analysis bucket is a UTC day) is
judged with those samples (issue 31): a job started at 23:58 UTC holds R1 at 00:03, not 00:05:00
plus 300 s. The look-back is `2 x min_runtime_s`; a GPU counts as begun inside it when its first
sample there is at most `min_runtime_s` before the start (so the previous window had under
`min_runtime_s` of it and reported nothing: a sampling outage of `min_runtime_s` just before
would fool this, and is the price of not reading the previous day).

Wasted GPU-hours: every allocated hour of the idle GPUs (the fix, requesting only the GPUs the code
uses, returns all of them), those before the window's start included for a GPU judged with them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby
from typing import TYPE_CHECKING, ClassVar

from analyzers.accounting.frames import FrameParams, prepare
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

    @property
    def lookback_s(self) -> float:
        """Seconds before the window it reads: a GPU begun shortly before, and the time before it."""
        return 2 * self.thresholds.min_runtime_s

    def run(
        self, conn: duckdb.DuckDBPyConnection, window: Window, catalog: JobCatalog
    ) -> list[Finding]:
        # the runner's frame has the pipeline's look-back already; run alone, the rule asks for its own
        frame = prepare(conn, window, FrameParams(lookback_s=self.lookback_s))
        start_s, runtime_s = window.start.timestamp(), self.thresholds.min_runtime_s
        rows = fetch(
            conn,
            f"""
            WITH begun AS (  -- GPUs whose samples began at most min_runtime_s before the start
                SELECT job_id, host, gpu, TRUE AS began FROM {frame.gpu}
                WHERE NOT in_window AND t >= ? GROUP BY job_id, host, gpu HAVING min(t) >= ?
            ), judged AS (  -- the window's samples, and those before it of a GPU begun there
                SELECT f.* FROM {frame.gpu} f LEFT JOIN begun USING (job_id, host, gpu)
                WHERE f.in_window OR (begun.began AND f.t >= ?)
            ), gpus AS (  -- the frame's (job, host, GPU) statistics (analyzers.accounting.frames)
                SELECT job_id, host, gpu, count(*) AS n_samples, sum(dt_s) / 3600.0 AS alloc_h,
                       min(t) AS first_t, max(t + dt_s) AS last_t,
                       sum(dt_s * util_pct) / sum(dt_s) FILTER (WHERE util_pct IS NOT NULL)
                           AS util_mean_all
                FROM judged GROUP BY job_id, host, gpu HAVING bool_or(in_window)
            )
            SELECT job_id, host, gpu, alloc_h, first_t, last_t, n_samples FROM gpus
            WHERE util_mean_all < ? AND alloc_h * 3600 > ?
            ORDER BY job_id, host, gpu""",
            [
                start_s - self.lookback_s,
                start_s - runtime_s,
                start_s - self.lookback_s,
                self.thresholds.zero_util_pct,
                runtime_s,
            ],
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
