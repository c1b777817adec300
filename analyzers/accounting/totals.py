"""A window's fleet totals (`usage.FleetTotals`) without its buckets: the fleet page's headline.

`usage.fleet_totals(usage.gpu_buckets(...))` builds one row per (bucket, GPU, job) first: on 7
days x 1,000 GPUs that is 213 k rows out of the hourly roll-up, 0.85 s of query and pandas before
the fleet page could draw its headline tiles. The totals need less. Each roll-up stage is summed
per (host, GPU, job) in DuckDB, together with the one figure of the buckets the accounting still
needs: each host's fullest (bucket, GPU, job) of the stage, whose sample count gives the host's
measured interval (`usage.host_intervals`). The raw tail is read as `gpu_buckets` reads it. The
same accounting (`usage.accounted`) then runs over 27 k rows on that week. Every total is the
buckets' total: the same sums, added in another order (a test holds them equal to 1e-12).

Reads through the DuckDB connection it is given and must never write anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analyzers.accounting.sql import DEFAULT_MAX_GAP_S
from analyzers.accounting.usage import (
    FleetTotals,
    accounted,
    fleet_totals,
    query,
    rollup_stages,
    staged_sql,
)
from analyzers.run.window import Window
from warehouse.read.rollup_merge import stored_sums

if TYPE_CHECKING:
    import duckdb

__all__ = ["window_totals"]

# One row per (host, GPU, job) of a roll-up stage: the sample count and the active and SM sums
# and counts as `usage`'s roll-up rows carry them, and `rollup_full`, the largest sample count of
# any of the host's (bucket, GPU, job) in the stage, its parts added first (usage._ROLLUP_SQL).
_STAGE_SQL = f"""
WITH parts AS MATERIALIZED (
    SELECT bucket_ts, coalesce(cluster, '') AS cluster, host, gpu_index, job_id, samples,
           {stored_sums(("active", "sm_active"))}
    FROM {{table}}
    WHERE bucket_ts >= to_timestamp($lo{{n}}) AND bucket_ts < to_timestamp($hi{{n}})
), fullest AS (
    SELECT host, max(samples) AS rollup_full FROM (
        SELECT host, sum(samples) AS samples FROM parts
        GROUP BY bucket_ts, cluster, host, gpu_index, job_id
    ) GROUP BY host
), per_gpu AS (
    SELECT host, gpu_index, job_id, CAST(sum(samples) AS BIGINT) AS samples,
           CAST(sum(active_n) AS BIGINT) AS active_n, sum(active_sum) AS active_sum,
           CAST(sum(sm_active_n) AS BIGINT) AS sm_n, sum(sm_active_sum) AS sm_sum
    FROM parts GROUP BY ALL
)
SELECT per_gpu.*, fullest.rollup_full, CAST({{rollup_s}} AS DOUBLE) AS rollup_s
FROM per_gpu JOIN fullest USING (host)
"""


def _stage_rows(table: str, rollup_s: int, n: int) -> str:
    return _STAGE_SQL.format(table=table, rollup_s=rollup_s, n=n)


def window_totals(
    con: duckdb.DuckDBPyConnection,
    window: Window,
    default_interval_s: float,
    *,
    max_gap_s: float = DEFAULT_MAX_GAP_S,
) -> FleetTotals:
    """`fleet_totals(gpu_buckets(con, window, default_interval_s, max_gap_s=max_gap_s))`, read
    per (host, GPU, job) instead of per bucket (the module docstring)."""
    stages = rollup_stages(con, window)
    sql, params = staged_sql(window, stages, default_interval_s, max_gap_s, _stage_rows)
    rows = query(con, sql, **params)
    if rows.empty:
        return fleet_totals(rows.assign(gpu_h=[], active_h=[], known_h=[], sm_h=[], sm_known_h=[]))
    return fleet_totals(accounted(rows, default_interval_s))
