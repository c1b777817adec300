"""The dashboard's read queries: a DuckDB connection (+ catalog) in, DataFrames out.

Fleet accounting (GPU-hours allocated, active, SM-active in time buckets) is
`analyzers.accounting.usage`, shared with the weekly reports so both show the same numbers; this
module derives the dashboard's views from its frames and adds the job, host, findings and trace
queries. Every fleet view is derived from one cached scan (`gpu_buckets`), so a page costs one
pass over the samples however many charts it draws.

Never writes: not telemetry, not the catalog (the profile-request button is `dashboard.actions`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from analyzers.accounting.totals import window_totals
from analyzers.accounting.usage import (
    FleetTotals,
    aligned,
    epoch_s,
    fleet_totals,
    gpu_buckets,
    host_intervals,
    job_efficiency,
    pct,
    query,
    window_ending,
)
from analyzers.accounting.usage import latest_sample as usage_latest_sample
from analyzers.reports.catalog_frames import catalog_frame as catalog_table
from analyzers.run.window import HOUR_S, Window, bucket_for
from dashboard import tiles
from dashboard.health import HEALTH_ROLLUPS, host_health
from warehouse.read.rollups import JOB_SERIES

if TYPE_CHECKING:
    import duckdb
    import sqlalchemy

    from warehouse.profiling.trace_backend import TraceStorage

# The shared accounting, re-exported: pages and tests read every fleet number through this module.
__all__ = [
    "HEALTH_ROLLUPS",
    "HOUR_S",
    "FleetTotals",
    "Window",
    "aligned",
    "bucket_for",
    "catalog_table",
    "epoch_s",
    "fleet_totals",
    "gpu_buckets",
    "host_health",
    "host_intervals",
    "job_efficiency",
    "latest_sample",
    "pct",
    "query",
    "window_ending",
    "window_totals",
]


def latest_sample(con: duckdb.DuckDBPyConnection) -> datetime | None:
    """Time of the newest GPU sample, or None on an empty warehouse.

    The answer of `analyzers.accounting.usage.latest_sample`, without scanning every timestamp of
    the warehouse: only raw rows at or after the job index's newest sample are read (zone maps
    skip older row groups), and the newest of them is the newest of all whenever there is one.
    """
    if _has_table(con, "gpu_jobs_1d"):
        rows = con.sql(
            "SELECT epoch_ms(max(ts)) FROM gpu_samples WHERE ts >= "
            "(SELECT coalesce(max(last_ts), TIMESTAMPTZ 'infinity') FROM gpu_jobs_1d)"
        ).fetchall()
        if rows and rows[0][0] is not None:
            return datetime.fromtimestamp(rows[0][0] / 1000, tz=UTC)
    return usage_latest_sample(con)


def gpu_hours_over_time(buckets: pd.DataFrame) -> pd.DataFrame:
    """Long frame (bucket, measure, gpu_h) with measure in allocated / active / SM-active."""
    allocated = buckets[buckets["job_id"].notna()]
    wide = allocated.groupby("bucket", as_index=False)[["gpu_h", "active_h", "sm_h"]].sum()
    wide = wide.rename(columns={"gpu_h": "allocated", "active_h": "active", "sm_h": "SM-active"})
    if not allocated["sm_known_h"].sum():
        wide = wide.drop(columns=["SM-active"])
    return wide.melt(id_vars="bucket", var_name="measure", value_name="gpu_h")


def utilization_by(buckets: pd.DataFrame, key: str, allocated_only: bool = True) -> pd.DataFrame:
    """Mean active % per (bucket, key), weighted by GPU-hours: (bucket, key, active_pct)."""
    rows = buckets[buckets["job_id"].notna()] if allocated_only else buckets
    grouped = rows.groupby(["bucket", key], as_index=False)[["active_h", "known_h"]].sum()
    grouped = grouped[grouped["known_h"] > 0]
    grouped["active_pct"] = 100.0 * grouped["active_h"] / grouped["known_h"]
    return grouped[["bucket", key, "active_pct"]]


def host_heatmap(buckets: pd.DataFrame) -> pd.DataFrame:
    """Mean active % per (bucket, cluster, host) over every GPU, allocated or not."""
    grouped = buckets.groupby(["bucket", "cluster", "host"], as_index=False)[
        ["active_h", "known_h"]
    ].sum()
    grouped = grouped[grouped["known_h"] > 0]
    grouped["active_pct"] = 100.0 * grouped["active_h"] / grouped["known_h"]
    return grouped[["bucket", "cluster", "host", "active_pct"]]


def utilization_percentiles(
    buckets: pd.DataFrame, quantiles: tuple[float, ...] = (0.5, 0.9, 0.99)
) -> pd.DataFrame:
    """Percentiles of per-GPU, per-bucket mean active % over allocated GPUs, weighted by hours.

    A fallback until the quantile-sketch roll-ups land (`analyzers.sketch.core`): bucket means smooth
    out sub-bucket spikes, so this under-states the tails of raw samples.
    """
    rows = buckets[(buckets["job_id"].notna()) & (buckets["known_h"] > 0)]
    if rows.empty:
        return pd.DataFrame({"quantile": list(quantiles), "active_pct": [float("nan")] * 3})
    values = (100.0 * rows["active_h"] / rows["known_h"]).to_numpy()
    weights = rows["known_h"].to_numpy()
    order = values.argsort(kind="stable")
    cumulative = weights[order].cumsum() / weights.sum()
    picks = [
        float(values[order][min((cumulative >= q).argmax(), len(order) - 1)]) for q in quantiles
    ]
    return pd.DataFrame({"quantile": list(quantiles), "active_pct": picks})


def sketch_percentiles(
    con: duckdb.DuckDBPyConnection, window: Window, quantiles: tuple[float, ...] = (0.5, 0.9, 0.99)
) -> pd.DataFrame | None:
    """Percentiles of raw samples' active % over allocated GPUs, merged from the quantile
    sketches the analyzers keep (`analyzers.quantiles.store`, views attached to `con`): every
    sample counts, tails included, within 1 %. None when no sketch covers the window."""
    from analyzers.quantiles.fleet_percentiles import percentiles

    sketch = percentiles(con, "active_pct", [], window.start, window.end, "allocated").get(())
    if sketch is None or sketch.count == 0:
        return None
    picks = [float(v) for v in sketch.quantiles(list(quantiles))]
    return pd.DataFrame({"quantile": list(quantiles), "active_pct": picks})


# -- one job ------------------------------------------------------------------------------------


# A job's hosts and span come from the warehouse's job index (`gpu_jobs_1d`, one row per day, job
# and GPU), plus raw samples from an hour before the index's newest sample on (the day being
# filled is re-indexed every maintenance pass; min and max do not mind the overlap). A sample that
# reaches the warehouse more than an hour late shows once its day is re-indexed.
JOB_INDEX_OVERLAP_MS = 3_600_000


def _has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    found = con.sql(
        "SELECT count(*) FROM (SELECT view_name AS n FROM duckdb_views() UNION ALL "
        "SELECT table_name FROM duckdb_tables()) WHERE n = $name",
        params={"name": name},
    ).fetchall()
    return bool(found[0][0])


def job_hosts(con: duckdb.DuckDBPyConnection, job_id: str) -> dict[str, tuple[int, int]]:
    """Per host a job ran on: its first and last GPU sample (epoch ms); empty for an unknown job."""
    cutoff_ms = None
    if _has_table(con, "gpu_jobs_1d"):
        newest = con.sql("SELECT epoch_ms(max(last_ts)) FROM gpu_jobs_1d").fetchall()[0][0]
        cutoff_ms = None if newest is None else int(newest) - JOB_INDEX_OVERLAP_MS
    if cutoff_ms is None:
        sql = "SELECT host, ts AS first_ts, ts AS last_ts FROM gpu_samples WHERE job_id = $job"
        params: dict[str, Any] = {"job": job_id}
    else:
        sql = (
            "SELECT host, first_ts, last_ts FROM gpu_jobs_1d WHERE job_id = $job UNION ALL "
            "SELECT host, ts, ts FROM gpu_samples "
            "WHERE job_id = $job AND ts >= to_timestamp($cutoff)"
        )
        params = {"job": job_id, "cutoff": cutoff_ms / 1000}
    rows = con.sql(
        f"SELECT host, epoch_ms(min(first_ts)), epoch_ms(max(last_ts)) FROM ({sql}) GROUP BY host",
        params=params,
    ).fetchall()
    return {str(host): (int(first), int(last)) for host, first, last in rows}


def job_span(
    con: duckdb.DuckDBPyConnection, job_id: str, hosts: dict[str, tuple[int, int]] | None = None
) -> Window | None:
    """The window a job's GPU samples cover, or None for a job the warehouse has never seen.

    `hosts` is `job_hosts(con, job_id)` where the caller already has it.
    """
    hosts = job_hosts(con, job_id) if hosts is None else hosts
    if not hosts:
        return None
    first = min(span[0] for span in hosts.values())
    last = max(span[1] for span in hosts.values())
    start = datetime.fromtimestamp(first / 1000, tz=UTC)
    end = datetime.fromtimestamp(last / 1000, tz=UTC) + timedelta(milliseconds=1)
    return Window(start, end)  # read in buckets of `bucket_for` its length


def _sql_list(values: list[str]) -> str:
    return ", ".join("'" + value.replace("'", "''") + "'" for value in values)


def _ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


def _series_tile(tile: tiles.Tile, number: int, hosts: list[str]) -> str:
    """Per (bucket, gpu) sums and counts of the job series over one tile."""
    bucket = "epoch_ms({}) // $bucket_ms * $bucket_ms AS bucket_ms, "
    gpu = "host || ':' || CAST(gpu_index AS VARCHAR) AS gpu, "
    if tile.bucket_ms:
        stats = ", ".join(f"sum({n}_sum) AS {n}_sum, sum({n}_n) AS {n}_n" for n in JOB_SERIES)
        return (
            f"SELECT {bucket.format('bucket_ts')}{gpu}{stats} FROM {tile.table} "
            f"WHERE job_id = $job AND bucket_ts >= to_timestamp($lo{number}) "
            f"AND bucket_ts < to_timestamp($hi{number}) GROUP BY ALL"
        )
    stats = ", ".join(
        f"sum({expr}) AS {n}_sum, count({expr}) AS {n}_n" for n, expr in JOB_SERIES.items()
    )
    return (
        f"SELECT {bucket.format('ts')}{gpu}{stats} FROM {tile.table} "
        f"WHERE job_id = $job AND ts >= to_timestamp($lo{number}) "
        f"AND ts < to_timestamp($hi{number}) AND host IN ({_sql_list(hosts)}) GROUP BY ALL"
    )


def _mean(name: str, scale: str = "") -> str:
    return f"{scale}(sum({name}_sum) / nullif(sum({name}_n), 0))"


def job_gpu_series(
    con: duckdb.DuckDBPyConnection,
    job_id: str,
    window: Window,
    hosts: dict[str, tuple[int, int]] | None = None,
) -> pd.DataFrame:
    """Per (bucket, gpu): mean utilization %, SM / tensor / DRAM activity %, memory and power.

    Whole minutes come from the job's rows of `gpu_jobs_1m` (sums and counts per column, so the
    means are those of the raw samples), the rest from raw samples of the hosts the job index
    names (`hosts`, as `job_hosts` returns them), which zone maps narrow to their row groups.
    """
    hosts = job_hosts(con, job_id) if hosts is None else hosts
    names = sorted(hosts) or [""]
    start_ms, end_ms = _ms(window.start), _ms(window.end)
    newest = None
    if _has_table(con, "gpu_jobs_1m") and _has_table(con, "gpu_jobs_1d"):
        # Both come from one pass and go live in one swap: the newest indexed sample's minute is
        # the newest bucket of gpu_jobs_1m, read from the small index.
        value = con.sql(
            "SELECT epoch_ms(date_trunc('minute', max(last_ts))) FROM gpu_jobs_1d"
        ).fetchall()[0][0]
        newest = None if value is None else int(value)
    planned = tiles.plan(start_ms, end_ms, [("gpu_jobs_1m", 60_000, newest)], "gpu_samples") or [
        tiles.Tile("gpu_samples", 0, start_ms, end_ms)
    ]
    params: dict[str, Any] = {"bucket_ms": window.bucket_s * 1000, "job": job_id}
    for number, tile in enumerate(planned):
        params[f"lo{number}"] = tile.start_ms / 1000
        params[f"hi{number}"] = tile.end_ms / 1000
    parts = " UNION ALL BY NAME ".join(
        _series_tile(tile, number, names) for number, tile in enumerate(planned)
    )
    frame = query(
        con,
        f"""
        SELECT bucket_ms, gpu,
               {_mean("gpu_util")} AS gpu_util_pct,
               {_mean("active", "100 * ")} AS active_pct,
               {_mean("sm_active", "100 * ")} AS sm_active_pct,
               {_mean("tensor_active", "100 * ")} AS tensor_active_pct,
               {_mean("dram_active", "100 * ")} AS dram_active_pct,
               {_mean("fb_used_mib")} AS fb_used_mib, {_mean("power_w")} AS power_w
        FROM ({parts})
        GROUP BY ALL ORDER BY 1, 2
        """,
        **params,
    )
    frame["bucket"] = pd.to_datetime(frame["bucket_ms"], unit="ms", utc=True)
    return frame.drop(columns=["bucket_ms"])


def job_step_series(con: duckdb.DuckDBPyConnection, job_id: str, window: Window) -> pd.DataFrame:
    """Per (bucket, rank): mean step time, mean data wait and its share of step time (P1's signal)."""
    bucket_ms = window.bucket_s * 1000
    frame = query(
        con,
        """
        SELECT epoch_ms(ts) // $bucket_ms * $bucket_ms AS bucket_ms,
               coalesce(rank, 0) AS rank, count(*) AS steps,
               avg(step_time_s) AS step_time_s, avg(data_wait_s) AS data_wait_s,
               100 * sum(data_wait_s) / nullif(sum(step_time_s), 0) AS data_wait_pct,
               avg(samples_per_s) AS samples_per_s
        FROM step_samples
        WHERE job_id = $job
        GROUP BY ALL ORDER BY 1, 2
        """,
        bucket_ms=bucket_ms,
        job=job_id,
    )
    frame["bucket"] = pd.to_datetime(frame["bucket_ms"], unit="ms", utc=True)
    return frame.drop(columns=["bucket_ms"])


def job_step_totals(con: duckdb.DuckDBPyConnection, job_id: str) -> dict[str, float | None]:
    """Steps, mean step time and the data-wait share of step time over the whole job."""
    rows = con.sql(
        """
        SELECT count(*), avg(step_time_s), 100 * sum(data_wait_s) / nullif(sum(step_time_s), 0)
        FROM step_samples WHERE job_id = $job
        """,
        params={"job": job_id},
    ).fetchall()
    steps, step_time_s, data_wait_pct = rows[0]
    return {"steps": float(steps), "step_time_s": step_time_s, "data_wait_pct": data_wait_pct}


# -- catalog ------------------------------------------------------------------------------------


def jobs_meta(engine: sqlalchemy.Engine | None) -> pd.DataFrame:
    """job_id with user, team, name and model from the catalog's jobs table (as far as present)."""
    jobs = catalog_table(engine, "jobs")
    if jobs.empty or "job_id" not in jobs.columns:
        return pd.DataFrame(columns=["job_id", "user", "team", "name"])
    keep = ["job_id", *(c for c in ("user", "team", "name", "model") if c in jobs.columns)]
    return jobs[keep].drop_duplicates("job_id").astype({"job_id": "str"})


# -- findings -----------------------------------------------------------------------------------


def job_findings(findings: pd.DataFrame, job_id: str) -> pd.DataFrame:
    """A job's stored findings, the costliest first."""
    if findings.empty or "job_id" not in findings.columns:
        return pd.DataFrame()
    rows = findings[findings["job_id"] == job_id]
    if "wasted_gpu_hours" in rows.columns:
        rows = rows.sort_values("wasted_gpu_hours", ascending=False)
    return rows.reset_index(drop=True)


# -- traces -------------------------------------------------------------------------------------

TRACE_SUFFIXES = (".json", ".json.gz")


def trace_list(traces: pd.DataFrame, storage: TraceStorage, traces_dir: Path) -> pd.DataFrame:
    """Captured traces: (trace_id, job_id, path, captured_at, size_mib), newest first.

    From the catalog's `traces` table (`warehouse.catalog.profiling`; captured_at is its
    uploaded_at; path where the server stored it, an s3:// URI in fleet mode; the size from the
    trace storage, `warehouse.profiling.trace_backend`); trace files found under
    `<data_dir>/traces/<job_id>/` that the catalog does not know are listed too, so a trace dropped
    there by hand (or by the SDK before the catalog saw it) can be opened.
    """
    rows: list[dict[str, Any]] = []
    known: set[str] = set()
    if not traces.empty and {"trace_id", "path"} <= set(traces.columns):
        for record in traces.to_dict("records"):
            location = str(record["path"])
            known.add(str(Path(location).resolve()))
            captured = record.get("uploaded_at")
            size = storage.size_bytes(str(record["trace_id"]))
            rows.append(
                {
                    "trace_id": str(record["trace_id"]),
                    "job_id": record.get("job_id"),
                    "path": location,
                    "captured_at": pd.Timestamp(captured) if captured is not None else pd.NaT,
                    "size_mib": size / 2**20 if size is not None else float("nan"),
                }
            )
    if traces_dir.is_dir():
        for path in sorted(traces_dir.glob("*/*")):
            if not path.name.endswith(TRACE_SUFFIXES) or str(path.resolve()) in known:
                continue
            stat = path.stat()
            rows.append(
                {
                    "trace_id": f"{path.parent.name}/{path.name.split('.')[0]}",
                    "job_id": path.parent.name,
                    "path": str(path),
                    "captured_at": pd.Timestamp(stat.st_mtime, unit="s", tz="UTC"),
                    "size_mib": stat.st_size / 2**20,
                }
            )
    frame = pd.DataFrame(rows, columns=["trace_id", "job_id", "path", "captured_at", "size_mib"])
    return frame.sort_values(["captured_at", "trace_id"], ascending=[False, True]).reset_index(
        drop=True
    )


def with_findings(jobs: pd.DataFrame, per_job: pd.DataFrame) -> pd.DataFrame:
    """Jobs with their findings count and recoverable GPU-hours (`opportunities.per_job`: the
    window's unsuppressed findings, each job's hours counted once); 0 for a job without any."""
    merged = jobs.merge(per_job[["job_id", "findings", "wasted_gpu_h"]], on="job_id", how="left")
    merged["findings"] = merged["findings"].fillna(0).astype("int64")
    merged["wasted_gpu_h"] = merged["wasted_gpu_h"].fillna(0.0)
    return merged


def search_jobs(jobs: pd.DataFrame, text: str) -> pd.DataFrame:
    """Jobs whose id, user, team or name contains `text` (case-insensitive, literal)."""
    needle = text.strip().lower()
    if not needle:
        return jobs
    fields = jobs[["job_id", "user", "team", "name"]].astype("object").fillna("").astype("str")
    hay = fields.agg(" ".join, axis=1).str.lower()
    return jobs[hay.str.contains(needle, regex=False)].reset_index(drop=True)


def unhealthy(health: pd.DataFrame) -> pd.Series:
    """Hosts to look at: an XID error, new ECC double-bit errors or PCIe replays, or throttling."""
    return (
        (health["xid_samples"] > 0)
        | (health["ecc_dbe_new"] > 0)
        | (health["pcie_replays_new"] > 0)
        | (health["thermal_throttle_s"] > 0)
        | (health["power_throttle_s"] > 0)
    )


def with_agents(health: pd.DataFrame, hosts: pd.DataFrame) -> pd.DataFrame:
    """Host health with the agent columns the catalog's hosts table has (version, last contact,
    spool depth where agents report it)."""
    wanted = [
        c for c in ("agent_version", "last_seen", "spool_bytes", "spool_batches") if c in hosts
    ]
    if hosts.empty or "host" not in hosts.columns or not wanted:
        return health
    agents = hosts[["host", *wanted]].rename(columns={"last_seen": "agent_last_contact"})
    return health.merge(agents, on="host", how="left")
