"""Energy per job: kWh from DCGM's energy counter, power integration where the counter is missing,
and the part of it spent while the GPU was allocated and idle.

The one statement of the definition (docs/analyzers.md, "Energy"):

- **Source.** `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION` (field 156, "Total energy consumption since
  boot (in mJ)", dcgm-exporter's default-counters.csv; a counter since the driver loaded). The
  collector keeps it in `gpu_samples.extra` under that name. A sample stands for the time until
  the next one (analyzers.accounting.sql), so its energy is the counter's delta to the next
  sample of the same GPU and job, when that gap is at most `max_gap_s`.
- **Resets.** A counter that goes down restarted (a driver reload, a node reboot): the delta to
  the restarted value would only count the energy since the reload, so that one interval is
  integrated from `DCGM_FI_DEV_POWER_USAGE` instead; without a power reading, the restarted
  value itself (the energy since the reload, a lower bound) is taken. Never a negative delta.
- **Fallback.** Where the counter is missing (a GPU or exporter that does not report it, the
  last sample of a job, a gap longer than `max_gap_s`), the sample's power (W) times its sample
  seconds, the accounting's own seconds: a finding's GPU-hours and its kWh cover the same time.
- **MIG.** The counter and the power reading are the device's, repeated on each MIG instance's
  row: each instance gets an equal share of the device's energy at that moment (counted over
  the MIG rows only, so a fleet without MIG pays nothing for it).
- **Idle-allocated energy.** The energy of the samples of a job whose utilization was 0 % (the
  accounting's utilization, `UTIL_PCT_SQL`): what R1 and R3's hours drew.

Reads raw samples only (the roll-ups keep power sums but no counter): a window older than the
raw retention has power-integrated energy at best, which `energy_source` says per job. Reads
through the connection it is given; never writes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import pandas as pd

from analyzers.accounting.sql import (
    DEFAULT_MAX_GAP_S,
    UTIL_PCT_SQL,
    sample_seconds_sql,
    typical_gap_sql,
)
from analyzers.run.window import Window

if TYPE_CHECKING:
    import duckdb

ENERGY_FIELD: Final = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"  # mJ since the driver loaded
J_PER_KWH: Final = 3.6e6

# One GPU (MIG instance) and job: where a delta of the counter belongs to one job's time.
_ONE_GPU: Final = ("cluster", "host", "gpu_index", "mig_instance_id", "job_id")

JOB_ENERGY_COLUMNS: Final = (
    "cluster",
    "job_id",
    "gpu_model",
    "gpu_h",
    "energy_kwh",
    "idle_energy_kwh",
    "counter_kwh",
    "power_kwh",
)


def sample_energy_sql(max_gap_s: float, default_interval_s: float, *, jobs: bool = False) -> str:
    """Every raw sample in [$start, $end) with its energy in joules (`energy_j`, NULL where
    neither the counter nor the power says anything), its part from the counter (`counter_j`),
    its sample seconds (`dt_s`) and utilization (`util_pct`). `jobs`: only the samples of the
    jobs in the list `$jobs` (MIG instances still share their device with every job on it)."""
    partition = ", ".join(_ONE_GPU)
    same_gpu = " AND ".join(f"g.{c} IS NOT DISTINCT FROM m.{c}" for c in _ONE_GPU)
    seconds = sample_seconds_sql(max_gap_s, default_interval_s)
    return f"""
WITH s AS (
    SELECT ts, epoch(ts) AS t, coalesce(cluster, '') AS cluster, host, gpu_index,
           mig_instance_id, job_id, gpu_model, {UTIL_PCT_SQL} AS util_pct, power_w,
           extra['{ENERGY_FIELD}'] AS energy_mj
    FROM gpu_samples
    WHERE ts >= to_timestamp($start) AND ts < to_timestamp($end)
          {"AND list_contains($jobs, job_id)" if jobs else ""}
), n AS (
    SELECT coalesce(cluster, '') AS cluster, host, gpu_index, ts, count(*) AS slices
    FROM gpu_samples
    WHERE ts >= to_timestamp($start) AND ts < to_timestamp($end)
          AND mig_instance_id IS NOT NULL
    GROUP BY ALL
), g AS MATERIALIZED (
    SELECT s.*, coalesce(n.slices, 1) AS slices,
           lead(t) OVER w - t AS gap_s, lead(energy_mj) OVER w AS next_mj
    FROM s LEFT JOIN n USING (cluster, host, gpu_index, ts)
    WINDOW w AS (PARTITION BY {partition} ORDER BY t)
), m AS (
    SELECT {partition}, {typical_gap_sql(None)} AS typical_s FROM g GROUP BY ALL
), d AS (
    SELECT g.*, {seconds} AS dt_s,
           CASE WHEN gap_s <= {max_gap_s} AND next_mj >= energy_mj
                THEN (next_mj - energy_mj) / 1000.0 / slices END AS counter_j,
           CASE WHEN gap_s <= {max_gap_s} AND next_mj < energy_mj
                THEN next_mj / 1000.0 / slices END AS since_reset_j
    FROM g JOIN m ON {same_gpu}
)
SELECT *, coalesce(counter_j, power_w * dt_s / slices, since_reset_j) AS energy_j FROM d
"""


def job_energy(
    con: duckdb.DuckDBPyConnection,
    window: Window,
    default_interval_s: float,
    *,
    max_gap_s: float = DEFAULT_MAX_GAP_S,
    jobs: list[str] | None = None,
) -> pd.DataFrame:
    """One row per (cluster, job) in the window, the unallocated GPUs' time as job_id None;
    `jobs`: those jobs only.

    Columns: cluster, job_id, gpu_model (the job's most common), gpu_h (allocated GPU-hours, the
    accounting's), energy_kwh, idle_energy_kwh (its samples at 0 % utilization), counter_kwh and
    power_kwh (how much of energy_kwh each source measured; a job whose counter_kwh equals its
    energy_kwh was measured by the counter alone). A job without any energy reading has NaN
    energy, never 0.
    """
    sql = f"""
SELECT cluster, job_id, mode(gpu_model) AS gpu_model, sum(dt_s) / 3600.0 AS gpu_h,
       sum(energy_j) / {J_PER_KWH} AS energy_kwh,
       coalesce(sum(energy_j) FILTER (WHERE util_pct = 0), 0) / {J_PER_KWH} AS idle_energy_kwh,
       coalesce(sum(counter_j), 0) / {J_PER_KWH} AS counter_kwh,
       coalesce(sum(energy_j) FILTER (WHERE counter_j IS NULL), 0) / {J_PER_KWH} AS power_kwh
FROM ({sample_energy_sql(max_gap_s, default_interval_s, jobs=jobs is not None)})
GROUP BY ALL
ORDER BY cluster, job_id NULLS LAST
"""
    params: dict[str, object] = {"start": window.start.timestamp(), "end": window.end.timestamp()}
    if jobs is not None:
        params["jobs"] = list(jobs)
    frame: pd.DataFrame = con.sql(sql, params=params).to_arrow_table().to_pandas()
    return frame[list(JOB_ENERGY_COLUMNS)]


def energy_source(row: pd.Series) -> str:
    """How a job's energy was measured: `counter`, `power` (integrated), `mixed` or `none`."""
    total = row["energy_kwh"]
    if pd.isna(total):
        return "none"
    if row["power_kwh"] == 0:
        return "counter"
    return "power" if row["counter_kwh"] == 0 else "mixed"
