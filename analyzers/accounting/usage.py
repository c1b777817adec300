"""Fleet usage accounting in time buckets: GPU-hours allocated, active and SM-active per (bucket,
cluster, host, GPU, job) in one pass over the warehouse, and the per-job and fleet totals built on it.

Shared by the weekly reports and the dashboard (which imports it: dashboard -> analyzers), so both
show the same numbers. The accounting is `analyzers.accounting.sql` (rules.md), the analyzers' own:
over raw samples every sample counts its sample seconds, gaps up to `max_gap_s` included, so an
agent outage of a few minutes stays allocated here as it does in every finding. Where the
warehouse's roll-ups cover the window (they keep sample counts and, per column, the sum and count of
the samples that had it, not gaps) a sample counts as its host's measured interval: for each
(bucket, GPU, job) group `(last ts - first ts) / (samples - 1)`, and a host's interval is the
median over its groups (robust to outages, which only stretch the groups they fall in); a column
is known for as many intervals as samples had it. `analyzers.accounting.sql` says where the two can
differ.

This module reads through the DuckDB connection it is given and must never write anything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pandas as pd

from analyzers.accounting.sql import (
    ACTIVE_FRACTION_SQL,
    DEFAULT_MAX_GAP_S,
    next_gap_sql,
    sample_seconds_sql,
    typical_gap_sql,
)
from analyzers.run.window import HOUR_S, Window, bucket_for
from warehouse.read.rollup_merge import stored_sums

if TYPE_CHECKING:
    import duckdb


def query(con: duckdb.DuckDBPyConnection, sql: str, **params: Any) -> pd.DataFrame:
    """Run one read query and return a DataFrame (through Arrow: no pytz, no extra copy)."""
    frame: pd.DataFrame = con.sql(sql, params=params or None).to_arrow_table().to_pandas()
    return frame


def epoch_s(moment: datetime) -> float:
    return moment.timestamp()


def latest_sample(con: duckdb.DuckDBPyConnection) -> datetime | None:
    """Time of the newest GPU sample, or None on an empty warehouse."""
    rows = con.sql("SELECT epoch_ms(max(ts)) FROM gpu_samples").fetchall()
    value = rows[0][0] if rows else None
    return None if value is None else datetime.fromtimestamp(value / 1000, tz=UTC)


def window_ending(
    con: duckdb.DuckDBPyConnection, length: timedelta, end: datetime | None = None
) -> Window | None:
    """The window of `length` ending at `end` (default: just after the newest sample).

    Pages default to the newest data rather than `now()`, so a stalled ingest still shows what was
    stored, and reports (which pass `end`) are reproducible.
    """
    if end is None:
        newest = latest_sample(con)
        if newest is None:
            return None
        end = newest + timedelta(milliseconds=1)
    return aligned(end, length)


def aligned(end: datetime, length: timedelta) -> Window:
    """The window of about `length` ending at `end`, its start rounded down to a whole bucket so
    bucket boundaries (and the warehouse's roll-ups) line up with it."""
    bucket_s = bucket_for(length)
    start_s = (end - length).timestamp() // bucket_s * bucket_s
    return Window(datetime.fromtimestamp(start_s, tz=UTC), end, bucket_s=bucket_s)


# One GPU (MIG instance) and job, or the GPU's unallocated samples: where sample seconds are measured.
_ONE_GPU = ("host", "gpu_index", "mig_instance_id", "job_id")


def _raw_sql(max_gap_s: float, default_interval_s: float) -> str:
    """Raw samples from `$raw_start` per (bucket, GPU, job), each counting its sample seconds
    (`*_s` sums); samples from `$context_start` on lend their gaps to the typical interval.

    One window pass finds each sample's gap to the next; the typical interval (a median per GPU
    and job) is an aggregate joined back rather than a second window over every sample.
    """
    partition = ", ".join(_ONE_GPU)
    same_gpu = " AND ".join(f"g.{c} IS NOT DISTINCT FROM m.{c}" for c in _ONE_GPU)
    seconds = sample_seconds_sql(max_gap_s, default_interval_s)
    return f"""
WITH s AS (
    SELECT ts, epoch(ts) AS t, coalesce(cluster, '') AS cluster, {partition},
           {ACTIVE_FRACTION_SQL} AS active_frac, sm_active, tensor_active, gpu_util,
           fb_used_mib, power_w
    FROM gpu_samples
    WHERE ts >= to_timestamp($context_start) AND ts < to_timestamp($end)
), g AS MATERIALIZED (
    SELECT *, {next_gap_sql(partition)} AS gap_s FROM s
), m AS (
    SELECT {partition}, {typical_gap_sql(None)} AS typical_s FROM g GROUP BY ALL
), d AS (
    SELECT g.*, m.typical_s, {seconds} AS dt_s
    FROM g JOIN m ON {same_gpu}
    WHERE g.ts >= to_timestamp($raw_start)
)
SELECT epoch_ms(ts) // $bucket_ms * $bucket_ms AS bucket_ms,
       cluster, host, gpu_index, job_id,
       count(*) AS samples,
       epoch_ms(min(ts)) AS first_ms, epoch_ms(max(ts)) AS last_ms,
       CAST(NULL AS BIGINT) AS rollup_full, CAST(NULL AS DOUBLE) AS rollup_s,
       min(typical_s) AS typical_s,
       sum(dt_s) AS gpu_s,
       coalesce(sum(dt_s) FILTER (WHERE active_frac IS NOT NULL), 0) AS known_s,
       coalesce(sum(dt_s * active_frac), 0) AS active_s,
       coalesce(sum(dt_s) FILTER (WHERE sm_active IS NOT NULL), 0) AS sm_known_s,
       coalesce(sum(dt_s * sm_active), 0) AS sm_s,
       coalesce(sum(dt_s) FILTER (WHERE tensor_active IS NOT NULL), 0) AS tensor_known_s,
       coalesce(sum(dt_s * tensor_active), 0) AS tensor_s,
       sum(gpu_util) AS util_sum, count(gpu_util) AS util_n,
       max(fb_used_mib) AS fb_used_mib_max, avg(power_w) AS power_w_mean
FROM d
GROUP BY ALL
"""


# A roll-up row carries, per column, the sum and the count of the samples that had it
# (warehouse.read.rollup_merge; `stored_sums` reads rows written before those existed): a column is
# known for its own count of samples, never for every sample of the row, and `active` is the
# accounting's active fraction summed per sample, as the raw reader computes it. A bucket may be
# split over several rows (parts rolled up as its samples arrived, warehouse.read.rollup_delta): they
# are added per roll-up bucket first, so `rollup_full` is a whole bucket's samples.
_SUMMED = ("active", "sm_active", "tensor_active", "gpu_util", "power_w")
_ROLLUP_SQL = f"""
WITH parts AS (
    SELECT bucket_ts, coalesce(cluster, '') AS cluster, host, gpu_index, job_id, samples,
           {stored_sums(_SUMMED)},
           fb_used_mib_max
    FROM {{table}}
    WHERE bucket_ts >= to_timestamp(${{lo}}) AND bucket_ts < to_timestamp(${{hi}})
), r AS (
    SELECT bucket_ts, cluster, host, gpu_index, job_id, sum(samples) AS samples,
           {", ".join(f"sum({c}_n) AS {c}_n, sum({c}_sum) AS {c}_sum" for c in _SUMMED)},
           max(fb_used_mib_max) AS fb_used_mib_max
    FROM parts GROUP BY ALL
)
SELECT epoch_ms(bucket_ts) // $bucket_ms * $bucket_ms AS bucket_ms,
       cluster, host, gpu_index, job_id,
       CAST(sum(samples) AS BIGINT) AS samples,
       CAST(NULL AS BIGINT) AS first_ms, CAST(NULL AS BIGINT) AS last_ms,
       max(samples) AS rollup_full, CAST({{rollup_s}} AS DOUBLE) AS rollup_s,
       CAST(sum(active_n) AS BIGINT) AS active_n, sum(active_sum) AS active_sum,
       CAST(sum(sm_active_n) AS BIGINT) AS sm_n, sum(sm_active_sum) AS sm_sum,
       CAST(sum(tensor_active_n) AS BIGINT) AS tensor_n, sum(tensor_active_sum) AS tensor_sum,
       sum(gpu_util_sum) AS util_sum, CAST(sum(gpu_util_n) AS BIGINT) AS util_n,
       max(fb_used_mib_max) AS fb_used_mib_max,
       sum(power_w_sum) / nullif(sum(power_w_n), 0) AS power_w_mean
FROM r
GROUP BY ALL
"""

# Roll-up tables of the warehouse (warehouse.read.rollups), coarsest first: (view, bucket seconds).
ROLLUPS = (("gpu_samples_1h", 3600), ("gpu_samples_1m", 60))


def _views(con: duckdb.DuckDBPyConnection) -> set[str]:
    names = {row[0] for row in con.sql("SELECT view_name FROM duckdb_views()").fetchall()}
    return names | {row[0] for row in con.sql("SELECT table_name FROM duckdb_tables()").fetchall()}


def _newest_bucket_s(con: duckdb.DuckDBPyConnection, table: str, after_s: float) -> float | None:
    """Start of `table`'s newest bucket (epoch seconds) if it is after `after_s`, else None; only
    buckets from `after_s` on are read, so the files of earlier days are pruned by their stats."""
    newest = con.sql(
        f"SELECT epoch_ms(max(bucket_ts)) FROM {table} WHERE bucket_ts > to_timestamp($after)",
        params={"after": after_s},
    ).fetchall()[0][0]
    return None if newest is None else newest / 1000


def _rollup_for(con: duckdb.DuckDBPyConnection, window: Window) -> tuple[str, int, float] | None:
    """The coarsest roll-up whose buckets tile the window's, and its cut-off (epoch seconds).

    The cut-off is the start of the newest roll-up bucket: that bucket may have been rolled up
    while still filling, so it and everything after it are read from a finer roll-up or from
    the raw samples (`rollup_stages`).
    """
    stages = rollup_stages(con, window)
    return (stages[0][0], stages[0][1], stages[0][3]) if stages else None


def rollup_stages(
    con: duckdb.DuckDBPyConnection, window: Window
) -> list[tuple[str, int, float, float]]:
    """The roll-ups that cover the window, coarsest first, each as (view, bucket seconds, from,
    cut-off) in epoch seconds, one after the other; raw samples are read from the last cut-off.

    The coarsest roll-up whose buckets tile the window's reads up to the start of its newest
    bucket (it may have been rolled up while still filling) or of the bucket holding the
    window's end; each finer roll-up reads on from there up to the start of its own. With the hourly and minute roll-ups that
    leaves at most a minute of raw samples instead of an hour, however large the fleet.
    """
    names = _views(con)
    start_s, end_s = window.start.timestamp(), window.end.timestamp()
    stages: list[tuple[str, int, float, float]] = []
    for table, rollup_s in ROLLUPS:
        if table not in names or window.bucket_s % rollup_s:
            continue
        lo = stages[-1][3] if stages else start_s
        if lo % rollup_s or lo >= end_s:
            continue
        newest = _newest_bucket_s(con, table, lo)
        # A bucket that holds the window's end holds samples after it too: raw from its start.
        hi = None if newest is None else min(newest, end_s // rollup_s * rollup_s)
        if hi is not None and hi > lo:
            stages.append((table, rollup_s, lo, hi))
    return stages


def gpu_buckets(
    con: duckdb.DuckDBPyConnection,
    window: Window,
    default_interval_s: float,
    *,
    max_gap_s: float = DEFAULT_MAX_GAP_S,
    rollups: bool = True,
) -> pd.DataFrame:
    """One row per (bucket, cluster, host, gpu_index, job_id) with GPU-hours already accounted.

    Reads the warehouse's roll-ups where they cover the window (a week of 1,000 GPUs is 170 k
    hourly rows instead of 60 M samples): the hourly ones up to their newest hour, the minute
    ones on to their newest minute, and raw samples after them (`rollup_stages`). A bucket may
    then have a row of each kind for one GPU and job: readers sum by key. Columns: bucket (UTC
    timestamp), cluster, host, gpu_index, job_id, samples, interval_s (the host's measured sample
    interval), gpu_h, known_h (hours whose active fraction is known), active_h, sm_known_h, sm_h,
    tensor_known_h, tensor_h, util_sum, util_n, fb_used_mib_max, power_w_mean. `default_interval_s` and
    `max_gap_s` are the accounting's (`analyzers.accounting.sql`: settings `agent.interval_s` and
    `analyzers.max_gap_s`). `rollups=False` reads raw samples only: every sample counts its own
    sample seconds, so a bucket's rows do not depend on which roll-ups exist when it is read.
    """
    stages = rollup_stages(con, window) if rollups else []
    sql, params = staged_sql(window, stages, default_interval_s, max_gap_s, _bucket_rows)
    raw = query(con, sql, **params)
    if raw.empty:
        return _empty_buckets()
    raw = accounted(raw, default_interval_s)
    raw["bucket"] = pd.to_datetime(raw["bucket_ms"], unit="ms", utc=True)
    return raw[list(_BUCKET_COLUMNS)]


def _bucket_rows(table: str, rollup_s: int, n: int) -> str:
    return _ROLLUP_SQL.format(table=table, lo=f"lo{n}", hi=f"hi{n}", rollup_s=rollup_s)


def staged_sql(
    window: Window,
    stages: list[tuple[str, int, float, float]],
    default_interval_s: float,
    max_gap_s: float,
    rolled: Callable[[str, int, int], str],
) -> tuple[str, dict[str, Any]]:
    """The read of `window`: `rolled(table, rollup_s, n)` over each roll-up stage (its range as
    parameters `lo<n>` and `hi<n>`), and the raw samples' bucket rows after the last stage."""
    params: dict[str, Any] = {
        "bucket_ms": window.bucket_s * 1000,
        "raw_start": epoch_s(window.start),
        "context_start": epoch_s(window.start),
        "end": epoch_s(window.end),
    }
    sql = _raw_sql(max_gap_s, default_interval_s)
    for n, (table, rollup_s, lo, hi) in enumerate(stages):
        params.update({f"lo{n}": lo, f"hi{n}": hi})
        sql = f"FROM ({rolled(table, rollup_s, n)}) UNION ALL BY NAME FROM ({sql})"
    if stages:
        cutoff = stages[-1][3]
        # The raw tail measures each GPU's typical interval over `max_gap_s` before it too, as a
        # read of the whole window would: a GPU with one sample in the tail is not "seen once".
        params.update(
            raw_start=cutoff, context_start=max(epoch_s(window.start), cutoff - max_gap_s)
        )
    return sql, params


def accounted(raw: pd.DataFrame, default_interval_s: float) -> pd.DataFrame:
    """`raw` (rows of raw samples' sample seconds and of roll-ups' per-sample sums) with each
    host's `interval_s` (`host_intervals`) and the accounted hours of `_MEASURES`."""
    intervals = host_intervals(raw, default_interval_s)
    raw["interval_s"] = raw["host"].map(intervals).astype("float64")
    for measure, (seconds, per_sample) in _MEASURES.items():
        rolled = raw[per_sample].fillna(0.0) * raw["interval_s"] if per_sample in raw else 0.0
        exact = raw[seconds] if seconds in raw else pd.Series(float("nan"), index=raw.index)
        raw[measure] = exact.fillna(rolled) / HOUR_S
    return raw


# Each accounted measure: its sample-seconds sum from raw rows, and the roll-up rows' per-sample
# sum that counts one measured interval per sample instead.
_MEASURES = {
    "gpu_h": ("gpu_s", "samples"),
    "known_h": ("known_s", "active_n"),
    "active_h": ("active_s", "active_sum"),
    "sm_known_h": ("sm_known_s", "sm_n"),
    "sm_h": ("sm_s", "sm_sum"),
    "tensor_known_h": ("tensor_known_s", "tensor_n"),
    "tensor_h": ("tensor_s", "tensor_sum"),
}

_BUCKET_COLUMNS = (
    "bucket",
    "cluster",
    "host",
    "gpu_index",
    "job_id",
    "samples",
    "interval_s",
    "gpu_h",
    "known_h",
    "active_h",
    "sm_known_h",
    "sm_h",
    "tensor_known_h",
    "tensor_h",
    "util_sum",
    "util_n",
    "fb_used_mib_max",
    "power_w_mean",
)


def _empty_buckets() -> pd.DataFrame:
    frame = pd.DataFrame({name: pd.Series(dtype="float64") for name in _BUCKET_COLUMNS})
    frame["bucket"] = pd.Series(dtype="datetime64[ms, UTC]")
    for name in ("cluster", "host", "job_id"):
        frame[name] = pd.Series(dtype="str")
    return frame


def host_intervals(raw: pd.DataFrame, default_interval_s: float, rollup_s: float = 0) -> pd.Series:
    """Sample interval per host, in seconds (see the module docstring).

    From raw rows: the median over a host's groups of (last - first) / (samples - 1); where
    buckets are too short to hold two samples of one GPU, the same ratio over each GPU-and-job's
    whole stay. From the raw tail of a read with roll-up rows (a minute, so one lost sample would
    move that ratio by a quarter): the median over the host's GPUs of their median gap between
    samples (`typical_s`), which a lost sample does not move. From roll-up rows only: the roll-up bucket over its fullest bucket's samples, of
    the host's coarsest roll-up (its `rollup_s` column, else `rollup_s`): an hour's count is
    the one a jittered clock moves least. `default_interval_s` for a host seen once.
    """
    exact = raw[raw["first_ms"].notna()]
    if "typical_s" in raw and raw["rollup_full"].notna().any():
        # Beside roll-ups the raw tail is short (a minute): one dropped sample moves a group's
        # (last - first) / (samples - 1) by a quarter, and the interval scales every rolled
        # row of the host. The median gap between samples (over `max_gap_s` before the tail
        # too) does not move.
        typical = exact[exact["typical_s"].notna()]
        measured = typical.groupby("host")["typical_s"].median()
    else:
        spaced = exact[exact["samples"] >= 2]
        per_group = (spaced["last_ms"] - spaced["first_ms"]) / 1000.0 / (spaced["samples"] - 1)
        measured = per_group.groupby(spaced["host"]).median()
    missing = exact[~exact["host"].isin(measured.index)]
    if not missing.empty:
        stays = missing.groupby(["host", "gpu_index", "job_id"], dropna=False).agg(
            first_ms=("first_ms", "min"), last_ms=("last_ms", "max"), samples=("samples", "sum")
        )
        stays = stays[stays["samples"] >= 2]
        per_stay = (stays["last_ms"] - stays["first_ms"]) / 1000.0 / (stays["samples"] - 1)
        measured = pd.concat([measured, per_stay.groupby(level="host").median()])
    rolled = raw[raw["rollup_full"].notna() & ~raw["host"].isin(measured.index)]
    if not rolled.empty:
        sizes = rolled.get("rollup_s")
        if sizes is None:  # rows from before the column: all of one roll-up, `rollup_s`
            sizes = pd.Series(float(rollup_s), index=rolled.index)
        rolled = rolled.assign(rollup_s=sizes.fillna(rollup_s).astype("float64"))
        coarsest = rolled["rollup_s"] == rolled.groupby("host")["rollup_s"].transform("max")
        rolled = rolled[coarsest & (rolled["rollup_s"] > 0)]
        fullest = rolled.groupby("host").agg(
            rollup_s=("rollup_s", "first"), samples=("rollup_full", "max")
        )
        measured = pd.concat([measured, fullest["rollup_s"] / fullest["samples"].astype("float64")])
    hosts = pd.Index(raw["host"].unique())
    return measured.astype("float64").round(3).reindex(hosts).fillna(default_interval_s)


@dataclass(frozen=True)
class FleetTotals:
    """GPU-hours in a window; `sm_h` is None where no allocated sample carries SM_ACTIVE."""

    capacity_h: float
    allocated_h: float
    active_h: float
    known_h: float
    sm_h: float | None
    sm_known_h: float
    gpus: int
    jobs: int

    @property
    def active_pct(self) -> float:
        return 100.0 * self.active_h / self.known_h if self.known_h else 0.0

    @property
    def idle_h(self) -> float:
        return self.known_h - self.active_h


def fleet_totals(buckets: pd.DataFrame) -> FleetTotals:
    allocated = buckets[buckets["job_id"].notna()]
    sm_known_h = float(allocated["sm_known_h"].sum())
    return FleetTotals(
        capacity_h=float(buckets["gpu_h"].sum()),
        allocated_h=float(allocated["gpu_h"].sum()),
        active_h=float(allocated["active_h"].sum()),
        known_h=float(allocated["known_h"].sum()),
        sm_h=float(allocated["sm_h"].sum()) if sm_known_h else None,
        sm_known_h=sm_known_h,
        gpus=int(buckets[["host", "gpu_index"]].drop_duplicates().shape[0]),
        jobs=int(allocated["job_id"].nunique()),
    )


def job_efficiency(buckets: pd.DataFrame, jobs_meta: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per job: GPUs, allocated/active/idle GPU-hours, mean active %, mean SM-active %.

    Sorted by idle GPU-hours (allocated hours with a known active fraction minus active hours),
    largest first: the idlest jobs are where the most GPU-hours can be won back.
    """
    allocated = buckets[buckets["job_id"].notna()].copy()
    allocated["gpu"] = allocated["host"] + ":" + allocated["gpu_index"].astype("int64").astype(str)
    per_job = allocated.groupby("job_id", as_index=False).agg(
        cluster=("cluster", "first"),
        gpus=("gpu", "nunique"),
        hosts=("host", "nunique"),
        first_seen=("bucket", "min"),
        last_seen=("bucket", "max"),
        allocated_h=("gpu_h", "sum"),
        known_h=("known_h", "sum"),
        active_h=("active_h", "sum"),
        sm_known_h=("sm_known_h", "sum"),
        sm_h=("sm_h", "sum"),
        tensor_known_h=("tensor_known_h", "sum"),
        tensor_h=("tensor_h", "sum"),
        fb_used_mib_max=("fb_used_mib_max", "max"),
    )
    per_job["idle_h"] = per_job["known_h"] - per_job["active_h"]
    per_job["active_pct"] = pct(per_job["active_h"], per_job["known_h"])
    per_job["sm_active_pct"] = pct(per_job["sm_h"], per_job["sm_known_h"])
    # over the hours TENSOR_ACTIVE was reported, which exporters may report less often than SM
    per_job["tensor_active_pct"] = pct(per_job["tensor_h"], per_job["tensor_known_h"])
    per_job = per_job.drop(columns=["known_h", "sm_known_h", "sm_h", "tensor_known_h", "tensor_h"])
    if jobs_meta is not None and not jobs_meta.empty:
        per_job = per_job.merge(jobs_meta, on="job_id", how="left")
    for column in ("user", "team", "name"):
        if column not in per_job.columns:
            per_job[column] = pd.Series([None] * len(per_job), dtype="object")
    return per_job.sort_values(["idle_h", "job_id"], ascending=[False, True]).reset_index(drop=True)


def pct(part: pd.Series, whole: pd.Series) -> pd.Series:
    """100 * part / whole, NaN where the whole is zero (unknown, not zero)."""
    return (100.0 * part / whole.where(whole > 0)).astype("float64")
