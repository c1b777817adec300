"""The Hosts page's node table, as ClusterCockpit's node list shows a cluster: per host its GPUs'
utilization, GPU memory, CPU load, host memory and the jobs running on it now.

GPU figures come from the page's accounted buckets (`analyzers.accounting.usage`: the same hours
as the Fleet page); CPU and memory from the host agent's whole-host rows (`host_samples` with no
job id, node_exporter's counters): mean CPU busy % and load over the window, host memory used at
the newest sample. A host without host rows shows "-" there, never 0. Reads only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from analyzers.accounting.usage import epoch_s, query

if TYPE_CHECKING:
    import duckdb

    from analyzers.run.window import Window

COLUMNS = (
    "host", "cluster", "gpus", "allocated_gpus", "active_pct", "gpu_mem_max_mib",
    "cpu_busy_pct", "load1", "mem_used_pct", "jobs_now", "running_jobs",
)  # fmt: skip

_HOST_SQL = """
SELECT host,
       avg(coalesce(cpu_user_pct, 0) + coalesce(cpu_system_pct, 0)) AS cpu_busy_pct,
       avg(load1) AS load1,
       arg_max(100.0 * mem_used_bytes / nullif(mem_total_bytes, 0), ts) AS mem_used_pct
FROM host_samples
WHERE job_id IS NULL AND ts >= to_timestamp($start) AND ts < to_timestamp($end)
GROUP BY host
"""


def host_load(con: duckdb.DuckDBPyConnection, window: Window) -> pd.DataFrame:
    """(host, cpu_busy_pct, load1, mem_used_pct) from the window's whole-host rows."""
    import duckdb

    try:
        return query(con, _HOST_SQL, start=epoch_s(window.start), end=epoch_s(window.end))
    except duckdb.CatalogException:  # a warehouse that never had host rows has no such view
        return pd.DataFrame(columns=["host", "cpu_busy_pct", "load1", "mem_used_pct"])


def node_table(buckets: pd.DataFrame, load: pd.DataFrame) -> pd.DataFrame:
    """One row per host (COLUMNS), busiest-allocated first."""
    if buckets.empty:
        return pd.DataFrame(columns=list(COLUMNS))
    gpus = buckets.assign(gpu_key=buckets["gpu_index"].astype(str))
    per_host = gpus.groupby(["cluster", "host"], as_index=False).agg(
        gpus=("gpu_key", "nunique"),
        known_h=("known_h", "sum"),
        active_h=("active_h", "sum"),
        gpu_mem_max_mib=("fb_used_mib_max", "max"),
    )
    per_host["active_pct"] = (
        100.0 * per_host["active_h"] / per_host["known_h"].where(per_host["known_h"] > 0)
    )
    # each host's own newest bucket: hosts report out of step, and the fleet's newest bucket
    # may hold only some of them yet
    newest = gpus[gpus["bucket"] == gpus.groupby("host")["bucket"].transform("max")]
    held = newest[newest["job_id"].notna()]
    now = held.groupby("host").agg(
        allocated_gpus=("gpu_key", "nunique"), jobs_now=("job_id", "nunique")
    )
    names = held.groupby("host")["job_id"].agg(lambda ids: ", ".join(sorted(set(map(str, ids)))))
    table = per_host.merge(now, left_on="host", right_index=True, how="left")
    table["running_jobs"] = table["host"].map(names).fillna("")
    table[["allocated_gpus", "jobs_now"]] = table[["allocated_gpus", "jobs_now"]].fillna(0)
    table = table.merge(load, on="host", how="left")
    table = table.sort_values(["cluster", "host"], kind="stable")
    return table[list(COLUMNS)].reset_index(drop=True)
