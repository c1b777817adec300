"""R13, GPU memory creeping: framebuffer use that keeps growing through a job.

Source: SageMaker Debugger's GPUMemoryIncrease rule: the moving average of GPU memory use growing
by more than 5 % over 10 windows. We cut each GPU's judged samples in the window into 10 equal
windows and fire when the last window's mean is more than 5 % of the device's memory above the
first's and at least 8 of the 9 steps between windows do not fall (a creep, not one jump; the
8-of-9 rule is ours), with no single step holding half the growth (a checkpoint loading or a
cache filling once is a jump, not a creep). A leak ends in an out-of-memory crash: a risk, not yet waste.

Wasted GPU-hours: 0. The evidence says how long until the GPU is full at the measured rate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby, pairwise
from typing import TYPE_CHECKING, ClassVar

from analyzers.accounting.frames import prepare
from analyzers.base import PartitionKey
from analyzers.findings import Finding, Severity
from analyzers.rules._common import fetch, make_finding, r

if TYPE_CHECKING:
    import duckdb

    from analyzers.base import JobCatalog
    from analyzers.run.window import Window


@dataclass(frozen=True)
class MemoryCreepThresholds:
    growth_frac: float = 0.05  # SageMaker GPUMemoryIncrease: increase of 5 %
    windows: int = 10  # SageMaker GPUMemoryIncrease: over 10 windows
    min_rising_steps: int = 8  # fleetscope: 8 of the 9 steps must not fall
    max_step_share: float = (
        0.5  # fleetscope: no one step holds half the growth (a load, not a leak)
    )
    min_judged_s: float = 1800.0  # fleetscope: 30 min of judged samples, 3 min per window


@dataclass
class MemoryCreep:
    name: ClassVar[str] = "memory_creep"
    rule_ids: ClassVar[tuple[str, ...]] = ("R13",)
    rule_names: ClassVar[dict[str, str]] = {"R13": "GPU memory creeping"}  # analyzers.rule_cards
    inputs: ClassVar[tuple[str, ...]] = ("gpu_samples",)
    partition_by: ClassVar[PartitionKey] = "job"
    thresholds: MemoryCreepThresholds = field(default_factory=MemoryCreepThresholds)

    def run(
        self, conn: duckdb.DuckDBPyConnection, window: Window, catalog: JobCatalog
    ) -> list[Finding]:
        th = self.thresholds
        frame = prepare(conn, window)
        rows = fetch(
            conn,
            f"""
            WITH s AS (
                SELECT job_id, host, gpu, t, fb_used_mib, fb_total_mib,
                       min(t) OVER (PARTITION BY job_id, host, gpu) AS t0,
                       max(t) OVER (PARTITION BY job_id, host, gpu) AS t1
                FROM {frame.gpu} WHERE in_window AND warm AND fb_used_mib IS NOT NULL
            )
            SELECT job_id, host, gpu,
                   least(CAST(floor((t - t0) / nullif(t1 - t0, 0) * ?) AS INTEGER), ? - 1) AS w,
                   avg(fb_used_mib) AS used, max(fb_total_mib) AS total,
                   min(t0) AS t0, max(t1) AS t1
            FROM s WHERE t1 - t0 >= ? GROUP BY ALL ORDER BY job_id, host, gpu, w
            """,
            [th.windows, th.windows, th.min_judged_s],
        )
        findings = []
        for (job_id, host), group in groupby(rows, key=lambda x: (x["job_id"], x["host"])):
            creeping = []
            for gpu, per_gpu in groupby(group, key=lambda x: x["gpu"]):
                items = list(per_gpu)
                means = [x["used"] for x in items]
                if len(means) < th.windows:
                    continue
                first = items[0]
                total = first["total"] or 0.0
                growth = means[-1] - means[0]
                rising = sum(b >= a for a, b in pairwise(means))
                steps = [b - a for a, b in pairwise(means)]
                one_jump = max(steps) > th.max_step_share * growth
                if (
                    total
                    and growth > th.growth_frac * total
                    and rising >= th.min_rising_steps
                    and not one_jump
                ):
                    # window means sit at window centres: (n - 1)/n of the span apart
                    span_h = (first["t1"] - first["t0"]) / 3600 * (th.windows - 1) / th.windows
                    rate = growth / span_h if span_h else 0.0
                    creeping.append((gpu, means, total, rate, first["t0"], first["t1"]))
            if not creeping:
                continue
            fastest = max(creeping, key=lambda c: c[3])
            _, means, total, rate, _, _ = fastest
            hours_left = (total - means[-1]) / rate if rate > 0 else None
            findings.append(
                make_finding(
                    catalog,
                    window,
                    rule_id="R13",
                    severity=Severity.WARN,
                    job_id=job_id,
                    host=host,
                    gpus=[c[0] for c in creeping],
                    start_t=min(c[4] for c in creeping),
                    end_t=max(c[5] for c in creeping),
                    title=(
                        f"GPU memory grew {(means[-1] - means[0]) / total:.0%} of capacity "
                        f"({rate:.0f} MiB/h)"
                    ),
                    recommendation=(
                        "Memory keeps growing: look for tensors kept across steps (appending "
                        "losses without .item(), caches keyed by input shape, autograd graphs held "
                        "by references) before the job runs out of memory."
                    ),
                    wasted_gpu_hours=0.0,
                    estimate_method="risk finding: no GPU-hours counted until the job crashes",
                    evidence={
                        "window_means_mib": [r(m, 1) for m in means],
                        "growth_mib_per_h": r(rate, 1),
                        "fb_total_mib": r(total, 1),
                        "hours_until_full": r(hours_left, 2),
                    },
                )
            )
        return findings
