"""GPU-hour accounting: how GPU samples become allocated, active and SM-active GPU-hours.

The one statement of the definition (rules.md, "Accounting every rule shares"); the analyzers'
frame (`analyzers.accounting.frames`, every telemetry rule) and the fleet usage of the dashboard and the
weekly reports (`analyzers.accounting.usage`) both build their SQL from the fragments here, so a
finding's GPU-hours and a page's GPU-hours are the same hours.

- **Sample seconds.** A sample stands for the time until the next sample of the same GPU (MIG
  instance) and job. A gap up to `max_gap_s` (setting `analyzers.max_gap_s`, 300 s) still counts:
  an agent outage or a dropped scrape does not end an allocation, the scheduler still held the
  GPU. A longer gap, or the last sample, counts as the GPU's typical interval: the median gap of
  its samples in the window, capped at `max_gap_s`, or `default_interval_s` (`agent.interval_s`)
  for a GPU seen once.
- **Allocated GPU-hours**: the sample seconds of rows with a `job_id`, over 3600.
- **Active fraction**: `DCGM_FI_PROF_GR_ENGINE_ACTIVE` where present, else `DCGM_FI_DEV_GPU_UTIL`
  / 100. Active GPU-hours are sample seconds times the active fraction; the hours it is *known*
  for are the sample seconds of samples that have one (a missing figure is unknown, not zero).
- **Utilization %**: `DCGM_FI_DEV_GPU_UTIL` (what jobstats and SageMaker Debugger threshold),
  else 100 x GR_ENGINE_ACTIVE (MIG reports no GPU_UTIL).
- **SM-active GPU-hours**: sample seconds times `DCGM_FI_PROF_SM_ACTIVE`, known only where the
  exporter reports it (off in dcgm-exporter's default CSV).

Where a reader has only the warehouse's roll-ups (per bucket the sample count and each column's
sum and count of the samples that had it, the active fraction's among them; no gaps), a sample
counts as its host's measured interval (`analyzers.accounting.usage.host_intervals`): the same
hours as above whenever no sample goes missing inside rolled-up time. That is the one place
the two can differ, by at most `max_gap_s` per outage; only roll-ups that keep sample seconds
would close it.

Never runs a query: SQL text only (DuckDB dialect), no I/O, no imports beyond the standard library.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ACTIVE_FRACTION_SQL",
    "DEFAULT_MAX_GAP_S",
    "UTIL_PCT_SQL",
    "next_gap_sql",
    "sample_seconds_sql",
    "typical_gap_sql",
]

DEFAULT_MAX_GAP_S: Final = 300.0  # settings `analyzers.max_gap_s`

ACTIVE_FRACTION_SQL: Final = "COALESCE(gr_engine_active, gpu_util / 100.0)"
UTIL_PCT_SQL: Final = "COALESCE(gpu_util, 100.0 * gr_engine_active)"


def next_gap_sql(partition: str, t: str = "t") -> str:
    """Seconds from each sample to the next one of the same `partition` (NULL for the last).

    `partition` names one GPU (MIG instance) and job, e.g. `job_id, host, gpu`; `t` is epoch seconds.
    """
    return f"lead({t}) OVER (PARTITION BY {partition} ORDER BY {t}) - {t}"


def typical_gap_sql(partition: str | None, gap: str = "gap_s") -> str:
    """The median gap of the partition's samples: its sample interval, outages hardly moving it.

    A window function over `partition`; with `partition` None the aggregate, for a query that
    groups by the partition itself (cheaper than a window over every sample).
    """
    return (
        f"median({gap})" if partition is None else f"median({gap}) OVER (PARTITION BY {partition})"
    )


def sample_seconds_sql(
    max_gap_s: float, default_interval_s: float, gap: str = "gap_s", typical: str = "typical_s"
) -> str:
    """The seconds one sample stands for, from its `gap` to the next and its GPU's `typical`."""
    return (
        f"CASE WHEN {gap} IS NOT NULL AND {gap} <= {max_gap_s} THEN {gap} "
        f"ELSE least(COALESCE({typical}, {default_interval_s}), {max_gap_s}) END"
    )
