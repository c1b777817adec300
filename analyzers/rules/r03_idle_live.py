"""R3, idle allocation (live): a GPU at 0 % in every sample for a long stretch of a running job.

Source: job_defense_shield (Princeton Research Computing) warns after 60 minutes of 0 % on every
sample and recommends cancelling at 120 minutes (its sliding 240/300-minute variant is the same
test with longer spans: set the thresholds). Stretches are found per GPU over the window plus a
look-back of the longer threshold (`lookback_s`, 120 min by default), so a stretch that began
before the window's start (an analysis bucket is a UTC day) is judged by its real length: R3 holds
60 min after the GPU went idle, not 60 min after midnight (issue 31). A stretch still running at
the window's end is marked `ongoing`.

Wasted GPU-hours: the idle stretches' hours inside the window (all of them come back on cancel),
plus, for a stretch the previous window did not report (shorter than `warn_idle_min` at the
window's start), its hours before the start: each idle hour is counted in exactly one window.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby
from typing import TYPE_CHECKING, ClassVar

from analyzers.accounting.frames import FrameParams, prepare
from analyzers.base import PartitionKey
from analyzers.findings import Finding, Severity
from analyzers.rules._common import fetch, make_finding, r

if TYPE_CHECKING:
    import duckdb

    from analyzers.base import JobCatalog
    from analyzers.run.window import Window


@dataclass(frozen=True)
class IdleThresholds:
    warn_idle_min: float = 60.0  # job_defense_shield: warn after 60 min at 0 %
    cancel_idle_min: float = 120.0  # job_defense_shield: cancel after 120 min at 0 %


@dataclass
class IdleAllocation:
    name: ClassVar[str] = "idle_live"
    rule_ids: ClassVar[tuple[str, ...]] = ("R3",)
    rule_names: ClassVar[dict[str, str]] = {"R3": "Idle allocation"}  # analyzers.rule_cards
    inputs: ClassVar[tuple[str, ...]] = ("gpu_samples",)
    partition_by: ClassVar[PartitionKey] = "job"
    thresholds: IdleThresholds = field(default_factory=IdleThresholds)

    @property
    def lookback_s(self) -> float:
        """Seconds before the window it reads: enough to judge a stretch by either threshold."""
        return max(self.thresholds.warn_idle_min, self.thresholds.cancel_idle_min) * 60.0

    def run(
        self, conn: duckdb.DuckDBPyConnection, window: Window, catalog: JobCatalog
    ) -> list[Finding]:
        th = self.thresholds
        # the runner's frame has the pipeline's look-back already; run alone, the rule asks for its own
        frame = prepare(conn, window, FrameParams(lookback_s=self.lookback_s))
        start_s = window.start.timestamp()
        runs = fetch(
            conn,
            f"""
            WITH s AS (
                SELECT job_id, host, gpu, t, dt_s, util_pct = 0 AS idle,
                       sum(CASE WHEN util_pct = 0 THEN 0 ELSE 1 END)
                           OVER (PARTITION BY job_id, host, gpu ORDER BY t) AS run_id
                FROM {frame.gpu} WHERE util_pct IS NOT NULL
            ), runs AS (
                SELECT job_id, host, gpu, min(t) AS run_start, max(t + dt_s) AS run_end,
                       max(t) AS last_t,
                       sum(dt_s) FILTER (WHERE t >= ?) / 3600.0 AS idle_in_window_h,
                       sum(dt_s) FILTER (WHERE t < ?) / 3600.0 AS idle_before_h,
                       max(t + dt_s) FILTER (WHERE t < ?) - min(t) AS before_s
                FROM s WHERE idle GROUP BY job_id, host, gpu, run_id
            ), last AS (
                SELECT job_id, host, gpu, max(t + dt_s) AS gpu_end FROM {frame.gpu}
                GROUP BY ALL
            )
            SELECT runs.* EXCLUDE (idle_before_h, before_s),
                   -- the previous window reported the stretch (and counted these hours) when
                   -- it was already `warn_idle_min` long at this window's start
                   CASE WHEN COALESCE(before_s, 0) < ? THEN COALESCE(idle_before_h, 0)
                        ELSE 0 END AS idle_before_h,
                   runs.run_end >= last.gpu_end AS ongoing
            FROM runs JOIN last USING (job_id, host, gpu)
            WHERE run_end - run_start >= ? AND last_t >= ?
            ORDER BY job_id, host, gpu, run_start
            """,
            [start_s, start_s, start_s, th.warn_idle_min * 60, th.warn_idle_min * 60, start_s],
        )
        findings = []
        for (job_id, host), group in groupby(runs, key=lambda x: (x["job_id"], x["host"])):
            items = list(group)
            longest_min = max((x["run_end"] - x["run_start"]) / 60 for x in items)
            cancel = longest_min >= th.cancel_idle_min
            gpus = sorted({x["gpu"] for x in items})
            before_h = sum(x["idle_before_h"] for x in items)
            idle_h = sum(x["idle_in_window_h"] or 0.0 for x in items) + before_h
            findings.append(
                make_finding(
                    catalog,
                    window,
                    rule_id="R3",
                    severity=Severity.CRITICAL if cancel else Severity.WARN,
                    job_id=job_id,
                    host=host,
                    gpus=gpus,
                    start_t=min(x["run_start"] for x in items),
                    end_t=max(x["run_end"] for x in items),
                    title=f"GPU(s) {', '.join(gpus)} at 0 % for {longest_min:.0f} min",
                    recommendation=(
                        "Cancel the job and resubmit it when it can use the GPU, or release the "
                        "GPUs while the job waits (an interactive session left open holds them)."
                        if cancel
                        else "The GPUs have been at 0 % for an hour: check the job is not stuck "
                        "(a hung collective, a debugger, a notebook left open)."
                    ),
                    wasted_gpu_hours=idle_h,
                    estimate_method="hours of the idle stretches inside the window"
                    + (
                        ", and before it of a stretch the previous window had not reported"
                        if before_h
                        else ""
                    ),
                    evidence={
                        "longest_idle_min": r(longest_min, 1),
                        "threshold_min": th.cancel_idle_min if cancel else th.warn_idle_min,
                        "ongoing": any(bool(x["ongoing"]) for x in items),
                        **({"idle_before_window_h": r(before_h)} if before_h else {}),
                        "stretches": [
                            {
                                "gpu": x["gpu"],
                                "from_epoch_s": x["run_start"],
                                "to_epoch_s": x["run_end"],
                            }
                            for x in items
                        ],
                    },
                )
            )
        return findings
