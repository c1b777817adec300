"""R16, throttling: the GPU runs slowed by its power or thermal limit while busy.

Primary signal (DCGM fields): DCGM_FI_DEV_POWER_VIOLATION and DCGM_FI_DEV_THERMAL_VIOLATION
(microseconds the GPU ran slowed, cumulative). The catalog gives no share; fleetscope flags a GPU
whose counters grow by more than 1 % of its busy time (below that, brief clock dips are normal
boost behaviour). Busy: utilization at or above 50 %. Counter resets (a driver reload) are
skipped, not counted negative.

Fallback, for exporters that do not publish the violation counters (dcgm-exporter's default CSV
does not; NVML-only agents): the same share judged from temperature, SM clock and power alone.
A busy sample is throttled when its SM clock is below 90 % of the GPU model's maximum SM clock
(NVML nvmlDeviceGetMaxClockInfo; NVIDIA datasheets: H100 SXM 1980 MHz, A100 1410 MHz, V100 SXM2
1530 MHz; unknown model: the job's highest observed SM clock) and either
- thermal: the GPU temperature is at or above 85 C. NVIDIA: "If a GPU hits the maximum
  temperature, the driver will throttle down performance" (NVIDIA KB 2752, "NVIDIA GPU maximum
  operating temperature and overheating"); 85 C is the lowest "GPU Max Operating Temp" that
  `nvidia-smi -q -d TEMPERATURE` reports for the data-centre parts above (configurable);
- power: the power draw is at or above 95 % of the board power limit (NVML's SwPowerCap clock
  event reason: "clocks have been optimized to ensure not to exceed currently set power limits";
  the limit defaults to the datasheet TDP: H100 SXM 700 W, H100 PCIe 350 W, A100 SXM 400 W, A100
  PCIe 300 W, V100 SXM2 300 W).

Wasted GPU-hours: throttled hours x (1 - SM clock while throttled / SM clock otherwise, or the
model's maximum when the GPU was never free): the work lost to the lower clock.
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

    from analyzers.base import JobCatalog
    from analyzers.run.window import Window


# (substring of DCGM's modelName, maximum SM clock MHz, board power limit W): NVIDIA datasheets
MODEL_LIMITS: tuple[tuple[str, float, float], ...] = (
    ("H100 80GB HBM3", 1980.0, 700.0),  # H100 SXM5
    ("H100 SXM", 1980.0, 700.0),
    ("H100 PCIe", 1755.0, 350.0),
    ("H100", 1980.0, 700.0),
    ("A100-SXM", 1410.0, 400.0),
    ("A100 80GB PCIe", 1410.0, 300.0),
    ("A100", 1410.0, 400.0),
    ("V100-SXM2", 1530.0, 300.0),
    ("V100-PCIE", 1380.0, 250.0),
)


@dataclass(frozen=True)
class ThrottlingThresholds:
    min_throttled_share: float = 0.01  # fleetscope: more than 1 % of busy time
    busy_util_pct: float = 50.0  # fleetscope: "busy" for this rule
    clock_drop_ratio: float = 0.9  # fallback: SM clock below 90 % of the model's maximum
    thermal_temp_c: float = 85.0  # fallback: NVIDIA KB 2752; nvidia-smi GPU Max Operating Temp
    power_cap_ratio: float = 0.95  # fallback: at the power limit (NVML SwPowerCap)


def _model_case(index: int) -> str:
    """SQL: the model's maximum SM clock (index 1) or power limit (index 2), NULL if unknown."""
    arms = " ".join(
        f"WHEN gpu_model LIKE '%{name}%' THEN {limits[index - 1]}" for name, *limits in MODEL_LIMITS
    )
    return f"CASE {arms} ELSE NULL END"


@dataclass
class Throttling:
    name: ClassVar[str] = "throttling"
    rule_ids: ClassVar[tuple[str, ...]] = ("R16",)
    rule_names: ClassVar[dict[str, str]] = {"R16": "Throttling"}  # analyzers.rule_cards
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
                SELECT job_id, host, gpu, t, dt_s, util_pct, sm_clock_mhz, temp_c, power_w,
                       power_violation_us IS NOT NULL OR thermal_violation_us IS NOT NULL
                           AS counters,
                       {_model_case(1)} AS model_clock, {_model_case(2)} AS cap_w,
                       power_violation_us - lag(power_violation_us) OVER w AS d_power,
                       thermal_violation_us - lag(thermal_violation_us) OVER w AS d_thermal
                FROM {frame.gpu} WHERE in_window
                WINDOW w AS (PARTITION BY job_id, host, gpu ORDER BY t)
            ), b AS (
                SELECT *,
                       COALESCE(model_clock, max(sm_clock_mhz) OVER (PARTITION BY job_id))
                           AS ref_clock
                FROM d WHERE util_pct >= ?
            ), c AS (
                SELECT *, COALESCE(sm_clock_mhz < ? * ref_clock, FALSE) AS slow,
                       COALESCE(temp_c >= ?, FALSE) AS hot,
                       COALESCE(power_w >= ? * cap_w, FALSE) AS capped
                FROM b
            ), e AS (
                SELECT *,
                    CASE WHEN counters THEN greatest(COALESCE(d_power, 0), 0) / 1e6
                         WHEN slow AND capped AND NOT hot THEN dt_s ELSE 0 END AS power_s,
                    CASE WHEN counters THEN greatest(COALESCE(d_thermal, 0), 0) / 1e6
                         WHEN slow AND hot THEN dt_s ELSE 0 END AS thermal_s
                FROM c
            )
            SELECT job_id, host, gpu, sum(dt_s) AS busy_s, sum(power_s) AS power_s,
                   sum(thermal_s) AS thermal_s, bool_or(counters) AS counters,
                   median(sm_clock_mhz) FILTER (WHERE power_s + thermal_s > 0) AS clock_throttled,
                   COALESCE(median(sm_clock_mhz) FILTER (WHERE power_s + thermal_s = 0),
                            max(ref_clock)) AS clock_free,
                   max(temp_c) AS temp_max_c, max(power_w / cap_w) AS power_of_cap,
                   min(t) AS t0, max(t + dt_s) AS t1
            FROM e GROUP BY ALL
            HAVING (sum(power_s) + sum(thermal_s)) > ? * sum(dt_s)
            ORDER BY job_id, host, gpu
            """,
            [
                th.busy_util_pct,
                th.clock_drop_ratio,
                th.thermal_temp_c,
                th.power_cap_ratio,
                th.min_throttled_share,
            ],
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
                        + (
                            ""
                            if all(g["counters"] for g in gpus)
                            else "; throttled time from SM clock below 90 % of the model's "
                            "maximum with temperature at the limit or power at the cap (no "
                            "violation counters published)"
                        )
                    ),
                    evidence={
                        "throttled_share": r(throttled_s / busy_s),
                        "power_violation_s": r(sum(g["power_s"] for g in gpus), 1),
                        "thermal_violation_s": r(sum(g["thermal_s"] for g in gpus), 1),
                        "sm_clock_throttled_mhz": r(gpus[0]["clock_throttled"], 0),
                        "sm_clock_free_mhz": r(gpus[0]["clock_free"], 0),
                        "temp_max_c": r(max((g["temp_max_c"] or 0.0) for g in gpus), 0),
                        "power_of_cap_max": r(max((g["power_of_cap"] or 0.0) for g in gpus), 3),
                        "source": (
                            "violation counters"
                            if all(g["counters"] for g in gpus)
                            else "temperature, SM clock and power (fallback)"
                        ),
                    },
                )
            )
        return findings
