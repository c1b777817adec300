"""R16, throttling: power or thermal violation counters rising while the GPU is busy.

Source: DCGM fields DCGM_FI_DEV_POWER_VIOLATION and DCGM_FI_DEV_THERMAL_VIOLATION (microseconds
the GPU ran slowed, cumulative) and DCGM_FI_DEV_CLOCKS_EVENT_REASONS. The catalog gives no share;
fleetscope flags a GPU whose counters grow by more than 1 % of its busy time (below that, brief
clock dips are normal boost behaviour). Busy: utilization at or above 50 %. Counter resets (a
driver reload) are skipped, not counted negative.

Wasted GPU-hours: throttled hours x (1 - SM clock while throttled / SM clock otherwise): the work
lost to the lower clock (0 when clocks are not reported).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby
from typing import TYPE_CHECKING, ClassVar

from analyzers.accounting.frames import prepare
from analyzers.base import PartitionKey
from analyzers.findings import Finding, Severity
from analyzers.rules._common import fetch, make_finding, r

if TYPE_CHECKING:
    import duckdb

    from analyzers.base import JobCatalog, Window


@dataclass(frozen=True)
class ThrottlingThresholds:
    min_throttled_share: float = 0.01  # fleetscope: more than 1 % of busy time
    busy_util_pct: float = 50.0  # fleetscope: "busy" for this rule


@dataclass
class Throttling:
    name: ClassVar[str] = "throttling"
    rule_ids: ClassVar[tuple[str, ...]] = ("R16",)
    inputs: ClassVar[tuple[str, ...]] = ("gpu_samples",)
    partition_by: ClassVar[PartitionKey] = "job"
    thresholds: ThrottlingThresholds = field(default_factory=ThrottlingThresholds)

    def run(
        self, conn: duckdb.DuckDBPyConnection, window: Window, catalog: JobCatalog
    ) -> list[Finding]:
        th = self.thresholds
        frame = prepare(conn, window)
        rows = fetch(
            conn,
            f"""
            WITH d AS (
                SELECT job_id, host, gpu, t, dt_s, util_pct, sm_clock_mhz,
                       power_violation_us - lag(power_violation_us) OVER w AS d_power,
                       thermal_violation_us - lag(thermal_violation_us) OVER w AS d_thermal
                FROM {frame.gpu} WHERE in_window
                WINDOW w AS (PARTITION BY job_id, host, gpu ORDER BY t)
            ), b AS (
                SELECT *, greatest(COALESCE(d_power, 0), 0) / 1e6 AS power_s,
                       greatest(COALESCE(d_thermal, 0), 0) / 1e6 AS thermal_s
                FROM d WHERE util_pct >= ?
            )
            SELECT job_id, host, gpu, sum(dt_s) AS busy_s, sum(power_s) AS power_s,
                   sum(thermal_s) AS thermal_s,
                   median(sm_clock_mhz) FILTER (WHERE power_s + thermal_s > 0) AS clock_throttled,
                   median(sm_clock_mhz) FILTER (WHERE power_s + thermal_s = 0) AS clock_free,
                   min(t) AS t0, max(t + dt_s) AS t1
            FROM b GROUP BY ALL
            HAVING (sum(power_s) + sum(thermal_s)) > ? * sum(dt_s)
            ORDER BY job_id, host, gpu
            """,
            [th.busy_util_pct, th.min_throttled_share],
        )
        findings = []
        for (job_id, host), group in groupby(rows, key=lambda x: (x["job_id"], x["host"])):
            gpus = list(group)
            throttled_s = sum(min(g["power_s"] + g["thermal_s"], g["busy_s"]) for g in gpus)
            busy_s = sum(g["busy_s"] for g in gpus)
            thermal = sum(g["thermal_s"] for g in gpus) > sum(g["power_s"] for g in gpus)
            wasted = 0.0
            for g in gpus:
                slow, fast = g["clock_throttled"], g["clock_free"]
                if slow and fast and fast > slow:
                    share = min(g["power_s"] + g["thermal_s"], g["busy_s"])
                    wasted += share / 3600 * (1 - slow / fast)
            findings.append(
                make_finding(
                    catalog,
                    window,
                    rule_id="R16",
                    severity=Severity.WARN,
                    job_id=job_id,
                    host=host,
                    gpus=[g["gpu"] for g in gpus],
                    start_t=min(g["t0"] for g in gpus),
                    end_t=max(g["t1"] for g in gpus),
                    title=(
                        f"{'thermal' if thermal else 'power'} throttling "
                        f"{throttled_s / busy_s:.0%} of busy time on {host}"
                    ),
                    recommendation=(
                        "Have the host checked: airflow, fan and inlet temperature (thermal), or "
                        "the power cap and PSU (power: nvidia-smi -q -d POWER); meanwhile this "
                        "host slows every job placed on it."
                    ),
                    wasted_gpu_hours=wasted,
                    estimate_method=(
                        "throttled hours x (1 - median SM clock while throttled / otherwise)"
                    ),
                    evidence={
                        "throttled_share": r(throttled_s / busy_s),
                        "power_violation_s": r(sum(g["power_s"] for g in gpus), 1),
                        "thermal_violation_s": r(sum(g["thermal_s"] for g in gpus), 1),
                        "sm_clock_throttled_mhz": r(gpus[0]["clock_throttled"], 0),
                        "sm_clock_free_mhz": r(gpus[0]["clock_free"], 0),
                    },
                )
            )
        return findings
