"""Roll-ups of gpu_samples, derived from segments day by day: what pages and reports read instead
of a week of raw samples (design.md: weekly report < 30 s, dashboard page < 2 s).

Two families, each a registry entry (`FAMILIES`) whose tables go live together:

- usage (`gpu_samples_1m`, `gpu_samples_1h`): per (bucket, cluster, host, GPU index, job) the
  sample count and the mean and max of the main utilisation columns, so a week-long fleet query
  reads 1/60 or 1/3600 of the raw rows.
- health_jobs, from one pass per (minute, GPU, job): `gpu_health_1m`, `gpu_health_1h` per
  (bucket, cluster, host, GPU index) with the newest sample time, the XID samples, and min / max
  of the error and throttle counters (the hosts page's "increase in the window" is max - min,
  rules R16/R17, so these combine exactly over any set of whole buckets); `gpu_jobs_1d`, the job
  index: per (day, job, cluster, host, GPU index) the first and last sample time and the count;
  and `gpu_jobs_1m`, per (minute, job, cluster, host, GPU index) the sum and count of each column
  the job page charts, sorted by job so one job's minutes are a few row groups.

Incremental by UTC day and family: a day is rolled up again only when its raw input changed, which
the manifest's mark `<family>/<day>` records as "<highest segment seq>:<row count>"; compaction
keeps both, so merging files never triggers recomputation, and a family added later is computed
for every day that still has raw segments without touching the others. A family's tables of a day
go live in one manifest swap. A day whose raw segments retention removed keeps its roll-ups. This
module must never modify raw segments or the telemetry DuckDB file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

import duckdb
import pyarrow as pa

from fleetscope.contract import GPU_SAMPLES
from warehouse.segments import Segment, SegmentStore

SOURCE_TABLE: Final = "gpu_samples"

# The columns analyzers and the dashboard aggregate over time: utilisation, memory, power,
# temperature, clocks and interconnect traffic. Counters and bitmasks are not averaged.
ROLLUP_COLUMNS: Final = (
    "gpu_util",
    "gr_engine_active",
    "sm_active",
    "sm_occupancy",
    "tensor_active",
    "dram_active",
    "fp16_active",
    "fp32_active",
    "fp64_active",
    "mem_copy_util",
    "fb_used_mib",
    "power_w",
    "temp_c",
    "sm_clock_mhz",
    "pcie_tx_bytes_s",
    "pcie_rx_bytes_s",
    "nvlink_tx_bytes_s",
    "nvlink_rx_bytes_s",
)

ROLLUP_SCHEMA: Final = pa.schema(
    [
        pa.field("bucket_ts", GPU_SAMPLES.field("ts").type, nullable=False),
        GPU_SAMPLES.field("cluster"),
        GPU_SAMPLES.field("host"),
        GPU_SAMPLES.field("gpu_index"),
        GPU_SAMPLES.field("job_id"),
        pa.field("samples", pa.int64(), nullable=False),
        *(
            pa.field(f"{column}_{stat}", pa.float64())
            for column in ROLLUP_COLUMNS
            for stat in ("mean", "max")
        ),
    ]
)

BUCKETS: Final[Mapping[str, str]] = {"gpu_samples_1m": "minute", "gpu_samples_1h": "hour"}

# Error and throttle counters (dcgm-exporter's cumulative fields, rules R16/R17): a window's
# increase is max - min, so min and max per bucket are all a reader needs.
HEALTH_COUNTERS: Final = (
    "ecc_dbe_total",
    "pcie_replay_total",
    "power_violation_us",
    "thermal_violation_us",
)

_TS = GPU_SAMPLES.field("ts").type

HEALTH_SCHEMA: Final = pa.schema(
    [
        pa.field("bucket_ts", _TS, nullable=False),
        GPU_SAMPLES.field("cluster"),
        GPU_SAMPLES.field("host"),
        GPU_SAMPLES.field("gpu_index"),
        pa.field("samples", pa.int64(), nullable=False),
        pa.field("last_ts", _TS, nullable=False),
        pa.field("xid_samples", pa.int64(), nullable=False),  # samples with xid_last > 0
        pa.field("xid_last_max", GPU_SAMPLES.field("xid_last").type),
        *(
            pa.field(f"{column}_{stat}", GPU_SAMPLES.field(column).type)
            for column in HEALTH_COUNTERS
            for stat in ("min", "max")
        ),
        pa.field("temp_c_max", GPU_SAMPLES.field("temp_c").type),
    ]
)

JOBS_SCHEMA: Final = pa.schema(
    [
        pa.field("bucket_ts", _TS, nullable=False),  # the UTC day
        pa.field("job_id", GPU_SAMPLES.field("job_id").type, nullable=False),
        GPU_SAMPLES.field("cluster"),
        GPU_SAMPLES.field("host"),
        GPU_SAMPLES.field("gpu_index"),
        pa.field("first_ts", _TS, nullable=False),
        pa.field("last_ts", _TS, nullable=False),
        pa.field("samples", pa.int64(), nullable=False),
    ]
)

# The job page's per-GPU series (`dashboard.data.job_gpu_series`): a mean is sum / count, and
# both are kept per column so a bucket of any size is exact however many values were blank.
# `active` is the accounting's active fraction (rules.md): GR_ENGINE_ACTIVE, else GPU_UTIL / 100.
JOB_SERIES: Final[Mapping[str, str]] = {
    "gpu_util": "gpu_util",
    "active": "coalesce(gr_engine_active, gpu_util / 100.0)",
    "sm_active": "sm_active",
    "tensor_active": "tensor_active",
    "dram_active": "dram_active",
    "fb_used_mib": "fb_used_mib",
    "power_w": "power_w",
}

JOB_MINUTES_SCHEMA: Final = pa.schema(
    [
        pa.field("bucket_ts", _TS, nullable=False),
        pa.field("job_id", GPU_SAMPLES.field("job_id").type, nullable=False),
        GPU_SAMPLES.field("cluster"),
        GPU_SAMPLES.field("host"),
        GPU_SAMPLES.field("gpu_index"),
        pa.field("samples", pa.int64(), nullable=False),
        *(
            field
            for name in JOB_SERIES
            for field in (
                pa.field(f"{name}_sum", pa.float64()),
                pa.field(f"{name}_n", pa.int64(), nullable=False),
            )
        ),
    ]
)

# Rows per Parquet row group of a roll-up file: small enough that a reader's zone maps skip most of
# a day (a job's minutes, a window's edge minutes), big enough to stay a few groups per file.
ROW_GROUP_ROWS: Final = 64 * 1024

Build = Callable[[duckdb.DuckDBPyConnection, list[str]], Mapping[str, pa.Table]]


@dataclass(frozen=True)
class Family:
    """Roll-up tables computed together from one day's raw files and published in one swap."""

    mark: str  # manifest mark prefix: `<mark>/<day>`
    tables: Mapping[str, pa.Schema]
    build: Build


def _files_sql(files: list[str]) -> str:
    listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
    return f"read_parquet([{listed}], hive_partitioning = false)"


def _query(files: list[str], unit: str) -> str:
    stats = ", ".join(f"avg({c}) AS {c}_mean, max({c}) AS {c}_max" for c in ROLLUP_COLUMNS)
    return (
        f"SELECT date_trunc('{unit}', ts) AS bucket_ts, cluster, host, gpu_index, job_id, "
        f"count(*) AS samples, {stats} FROM {_files_sql(files)} "
        "GROUP BY ALL ORDER BY host, gpu_index, bucket_ts"
    )


def _build_usage(conn: duckdb.DuckDBPyConnection, files: list[str]) -> Mapping[str, pa.Table]:
    return {
        table: conn.sql(_query(files, unit)).to_arrow_table() for table, unit in BUCKETS.items()
    }


def _counter_stats(suffixed: bool) -> str:
    """min and max of every counter, over raw columns or over earlier `<counter>_<min|max>`."""
    return ", ".join(
        f"{agg}({column}{f'_{agg}' if suffixed else ''}) AS {column}_{agg}"
        for column in HEALTH_COUNTERS
        for agg in ("min", "max")
    )


def _combine_health(source: str, unit: str) -> str:
    """Health rows of `source` re-bucketed by `unit`: every statistic is a count, min or max."""
    counters = _counter_stats(suffixed=True)
    return (
        f"SELECT date_trunc('{unit}', bucket_ts) AS bucket_ts, cluster, host, gpu_index, "
        "sum(samples) AS samples, max(last_ts) AS last_ts, sum(xid_samples) AS xid_samples, "
        f"max(xid_last_max) AS xid_last_max, {counters}, max(temp_c_max) AS temp_c_max "
        f"FROM {source} GROUP BY ALL"
    )


def _series_stats() -> str:
    return ", ".join(
        f"sum({expression}) AS {name}_sum, count({expression}) AS {name}_n"
        for name, expression in JOB_SERIES.items()
    )


def _build_health(conn: duckdb.DuckDBPyConnection, files: list[str]) -> Mapping[str, pa.Table]:
    """One pass over the day's raw rows per (minute, GPU, job); every table derives from it."""
    conn.execute(
        "CREATE OR REPLACE TEMP TABLE _health_job AS "
        "SELECT date_trunc('minute', ts) AS bucket_ts, cluster, host, gpu_index, job_id, "
        "count(*) AS samples, min(ts) AS first_ts, max(ts) AS last_ts, "
        "count(*) FILTER (WHERE xid_last > 0) AS xid_samples, max(xid_last) AS xid_last_max, "
        f"{_counter_stats(suffixed=False)}, max(temp_c) AS temp_c_max, {_series_stats()} "
        f"FROM {_files_sql(files)} GROUP BY ALL"
    )
    # Minutes sorted by time, so a reader of a window's edges prunes the rest by zone maps.
    minute = _combine_health("_health_job", "minute") + " ORDER BY bucket_ts, host, gpu_index"
    hour = _combine_health("_health_job", "hour") + " ORDER BY host, gpu_index, bucket_ts"
    # Sorted by job, so a job's page reads one row group of the index.
    jobs = (
        "SELECT date_trunc('day', bucket_ts) AS bucket_ts, job_id, cluster, host, gpu_index, "
        "min(first_ts) AS first_ts, max(last_ts) AS last_ts, sum(samples) AS samples "
        "FROM _health_job WHERE job_id IS NOT NULL GROUP BY ALL "
        "ORDER BY job_id, host, gpu_index"
    )
    series = ", ".join(f"{name}_sum, {name}_n" for name in JOB_SERIES)
    job_minutes = (
        f"SELECT bucket_ts, job_id, cluster, host, gpu_index, samples, {series} "
        "FROM _health_job WHERE job_id IS NOT NULL ORDER BY job_id, host, gpu_index, bucket_ts"
    )
    try:
        return {
            "gpu_health_1m": conn.sql(minute).to_arrow_table(),
            "gpu_health_1h": conn.sql(hour).to_arrow_table(),
            "gpu_jobs_1d": conn.sql(jobs).to_arrow_table(),
            "gpu_jobs_1m": conn.sql(job_minutes).to_arrow_table(),
        }
    finally:
        conn.execute("DROP TABLE _health_job")


FAMILIES: Final[tuple[Family, ...]] = (
    Family("rollup", {name: ROLLUP_SCHEMA for name in BUCKETS}, _build_usage),
    Family(
        "health_jobs",
        {
            "gpu_health_1m": HEALTH_SCHEMA,
            "gpu_health_1h": HEALTH_SCHEMA,
            "gpu_jobs_1d": JOBS_SCHEMA,
            "gpu_jobs_1m": JOB_MINUTES_SCHEMA,
        },
        _build_health,
    ),
)
ROLLUP_TABLES: Final[Mapping[str, pa.Schema]] = {
    name: table_schema for family in FAMILIES for name, table_schema in family.tables.items()
}


def _mark(segments: list[Segment]) -> str:
    return f"{max(s.seq for s in segments)}:{sum(s.rows for s in segments)}"


def update_rollups(store: SegmentStore) -> int:
    """Roll up every (family, day) whose raw segments changed since; returns the days touched."""
    manifest = store.snapshot()
    done: set[str] = set()
    conn = duckdb.connect(":memory:")
    try:
        conn.execute("SET TimeZone = 'UTC'")
        conn.execute("SET threads = 1")  # background work: leave the cores to ingest
        conn.execute("SET enable_progress_bar = false")  # it would print into the server log
        for date, raw in sorted(manifest.by_date(SOURCE_TABLE).items()):
            mark = _mark(raw)
            files = [str(store.path(s)) for s in raw]
            seq = max(s.seq for s in raw)
            for family in FAMILIES:
                key = f"{family.mark}/{date}"
                if manifest.marks.get(key) == mark:
                    continue
                changes: dict[str, tuple[list[Segment], list[Segment]]] = {}
                for table, result in family.build(conn, files).items():
                    rolled = result.cast(family.tables[table])
                    new = store.write_parts(
                        store.new_name(table, date, seq),
                        rolled.schema,
                        (
                            rolled.slice(offset, ROW_GROUP_ROWS)
                            for offset in range(0, max(rolled.num_rows, 1), ROW_GROUP_ROWS)
                        ),
                    )
                    changes[table] = (manifest.by_date(table).get(date, []), [new])
                if store.swap(changes, marks={key: mark}):
                    done.add(date)
                else:
                    store.discard(s for _old, new in changes.values() for s in new)
    finally:
        conn.close()
    return len(done)
