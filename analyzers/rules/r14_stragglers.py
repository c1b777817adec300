"""R14, stragglers / imbalance: the GPUs of one job do not work alike.

Sources: SageMaker Debugger's LoadBalancing rule compares per-GPU utilization histograms of one
job and flags a difference above 0.2; HTA's straggler analysis looks for the rank the others wait
on. We build each GPU's utilization histogram (10 bins of 10 %) over its judged samples, measure
the total-variation distance (half the L1 distance, 0..1) between every pair, and flag the job when
the largest distance exceeds 0.2 and the GPUs' mean utilizations also differ by more than 20
points (the shared truth's reading of "differ by > 0.2": a shift across one bin edge is not a
straggler). The odd GPUs are those whose median distance to the others exceeds 0.2. Jobs with fewer than `min_samples_per_gpu` judged samples on a
GPU are not judged: a short histogram is noise.

Wasted GPU-hours: for each GPU of the job, its allocated hours x (busiest GPU's mean utilization -
its own) / busiest: the GPU time the less busy GPUs spent waiting for the busiest.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from itertools import combinations, groupby
from typing import TYPE_CHECKING, ClassVar

from analyzers.accounting.frames import prepare
from analyzers.base import PartitionKey
from analyzers.findings import Finding, Severity
from analyzers.rules._common import fetch, make_finding, r

if TYPE_CHECKING:
    import duckdb

    from analyzers.base import JobCatalog
    from analyzers.run.window import Window

BINS = 10


def tv_distance(p: list[float], q: list[float]) -> float:
    return 0.5 * sum(abs(a - b) for a, b in zip(p, q, strict=True))


@dataclass(frozen=True)
class StragglerThresholds:
    max_histogram_distance: float = 0.2  # SageMaker LoadBalancing / rules.md: differ by > 0.2
    min_samples_per_gpu: int = 60  # fleetscope: 10 min at 10 s before a histogram means anything
    min_mean_gap_pct: float = 20.0  # rules.md R14: per-GPU utilization differs by > 0.2


@dataclass
class Stragglers:
    name: ClassVar[str] = "stragglers"
    rule_ids: ClassVar[tuple[str, ...]] = ("R14",)
    rule_names: ClassVar[dict[str, str]] = {"R14": "Stragglers"}  # analyzers.rule_cards
    inputs: ClassVar[tuple[str, ...]] = ("gpu_samples",)
    partition_by: ClassVar[PartitionKey] = "job"
    thresholds: StragglerThresholds = field(default_factory=StragglerThresholds)

    def run(
        self, conn: duckdb.DuckDBPyConnection, window: Window, catalog: JobCatalog
    ) -> list[Finding]:
        th = self.thresholds
        frame = prepare(conn, window)
        rows = fetch(
            conn,
            f"""
            SELECT g.job_id, g.host || ':' || g.gpu AS gpu, s.host, s.alloc_h, s.util_mean,
                   least(CAST(floor(g.util_pct / 10) AS INTEGER), {BINS - 1}) AS bin,
                   count(*) AS n, min(g.t) AS t0, max(g.t + g.dt_s) AS t1
            FROM {frame.gpu} g JOIN {frame.jobgpu} s USING (job_id, host, gpu)
            WHERE g.in_window AND g.warm AND g.util_pct IS NOT NULL
            GROUP BY ALL ORDER BY g.job_id, gpu, bin
            """,
        )
        findings = []
        for job_id, job_group in groupby(rows, key=lambda x: x["job_id"]):
            hist: dict[str, list[float]] = {}
            meta: dict[str, dict[str, float | str]] = {}
            for gpu, items in groupby(job_group, key=lambda x: x["gpu"]):
                cells = list(items)
                counts = [0.0] * BINS
                for c in cells:
                    counts[c["bin"]] += c["n"]
                total = sum(counts)
                if total < th.min_samples_per_gpu:
                    continue
                hist[gpu] = [c / total for c in counts]
                meta[gpu] = {
                    "host": cells[0]["host"],
                    "alloc_h": cells[0]["alloc_h"],
                    "util": cells[0]["util_mean"] or 0.0,
                    "t0": min(c["t0"] for c in cells),
                    "t1": max(c["t1"] for c in cells),
                }
            if len(hist) < 2:
                continue
            dist = {
                pair: tv_distance(hist[pair[0]], hist[pair[1]]) for pair in combinations(hist, 2)
            }
            worst = max(dist.values())
            utils = [float(m["util"]) for m in meta.values()]
            if worst <= th.max_histogram_distance or max(utils) - min(utils) <= th.min_mean_gap_pct:
                continue
            median_dist = {
                g: statistics.median(d for pair, d in dist.items() if g in pair) for g in hist
            }
            odd = sorted(g for g, d in median_dist.items() if d > th.max_histogram_distance)
            if not odd:
                odd = sorted(g for g in hist if median_dist[g] == max(median_dist.values()))
            busiest = max(float(m["util"]) for m in meta.values())
            wasted = sum(
                float(m["alloc_h"]) * (busiest - float(m["util"])) / busiest for m in meta.values()
            )
            hosts = sorted({str(m["host"]) for m in meta.values()})
            single = hosts[0] if len(hosts) == 1 else None
            labels = [g.split(":", 1)[1] for g in odd] if single else odd
            findings.append(
                make_finding(
                    catalog,
                    window,
                    rule_id="R14",
                    severity=Severity.WARN,
                    job_id=job_id,
                    host=single,
                    gpus=labels,
                    start_t=min(float(m["t0"]) for m in meta.values()),
                    end_t=max(float(m["t1"]) for m in meta.values()),
                    title=(
                        f"imbalance: utilization histograms differ by {worst:.2f} "
                        f"(odd GPU(s): {', '.join(odd)})"
                    ),
                    recommendation=(
                        "One rank works differently from the rest. Check its host (throttling, "
                        "a slow disk or NIC), uneven data shards, or work done on rank 0 only "
                        "(logging, evaluation, checkpointing) that the others wait for."
                    ),
                    wasted_gpu_hours=wasted,
                    estimate_method=(
                        "sum over the job's GPUs of allocated hours x (busiest GPU's mean "
                        "utilization - its own) / busiest"
                    ),
                    evidence={
                        "max_histogram_distance": r(worst),
                        "threshold": th.max_histogram_distance,
                        "util_mean_pct": {g: r(float(m["util"]), 2) for g, m in meta.items()},
                    },
                )
            )
        return findings
