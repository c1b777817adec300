"""Roll-ups of gpu_samples, derived from segments day by day: what pages and reports read instead
of a week of raw samples (design.md: weekly report < 30 s, dashboard page < 2 s).

Two families, each a registry entry (`FAMILIES`) whose tables go live together:

- usage (`gpu_samples_1m`, `gpu_samples_1h`): per (bucket, cluster, host, GPU index, job) the
  sample count and the mean and max of the main utilisation columns, plus each column's sum and
  count of values and those of the accounting's per-sample active fraction (warehouse.read.rollup_merge,
  shared with fleet mode), so a week-long fleet query reads 1/60 or 1/3600 of the raw rows, weighs
  each column by the samples that had it, and late samples merge exactly.
- health_jobs, from one pass per (minute, GPU, job): `gpu_health_1m`, `gpu_health_1h` per
  (bucket, cluster, host, GPU index) with the newest sample time, the XID samples, and min / max
  of the error and throttle counters (the hosts page's "increase in the window" is max - min,
  rules R16/R17, so these combine exactly over any set of whole buckets); `gpu_jobs_1d`, the job
  index: per (day, job, cluster, host, GPU index) the first and last sample time and the count;
  and `gpu_jobs_1m`, per (minute, job, cluster, host, GPU index) the sum and count of each column
  the job page charts, sorted by job so one job's minutes are a few row groups.

Every statistic of every table is a count, sum, min or max (a mean is kept with its sum and count),
so each table has a merge (`Family.merge`): its rows and rows of other samples of the same buckets
combine into the rows of all the samples taken together, exactly (sums of doubles to rounding
order).

Incremental by UTC day and family: the manifest's mark `<family>/<day>` records the raw input the
day's roll-ups hold as "<highest segment seq>:<row count>"; compaction keeps both, so merging files
never triggers recomputation, and a family added later is computed for every day that still has
raw segments without touching the others. Raw segments published since are rolled up alone and
added as parts of the day's tables (warehouse.read.rollup_delta: at most a few files per table and day,
merged as they pile up), so roll-ups follow ingest within a pass of the server's roll-up cadence
(warehouse.storage.maintenance) however large the day; a day whose mark cannot tell its new rows apart is
rolled up whole again. A table may hold several rows of one key: readers aggregate by key. A family's tables of a day
go live in one manifest swap. Retention retires a day's raw segments only when every family's mark
is theirs, and marks the day `raw_retired/<day>` in the same swap (warehouse.storage.retention). From then
on the day's roll-ups are the only record of those samples: a raw segment of the day that arrives
later (a spool replayed weeks later) is merged into them, every family in one swap that also
retires it (`_merge_late`), so it is counted once and never rolled up alone in their place. This
module must never modify raw segments other than by that swap, nor the telemetry DuckDB file.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

import duckdb
import pyarrow as pa

from fleetscope.contract import GPU_SAMPLES
from warehouse.read import rollup_delta, rollup_format
from warehouse.read.rollup_merge import (
    ACTIVE_FRACTION,
    MERGE_COLUMNS,
    raw_usage_stats,
    usage_merge_sql,
)
from warehouse.read.rollup_merge import ROLLUP_COLUMNS as ROLLUP_COLUMNS
from warehouse.storage.segments import Manifest, Segment, SegmentStore

log = logging.getLogger(__name__)

SOURCE_TABLE: Final = "gpu_samples"

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
        *(
            pa.field(name, pa.float64() if name.endswith("_sum") else pa.int64())
            for name in MERGE_COLUMNS
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
    "active": ACTIVE_FRACTION,
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

Build = Callable[[duckdb.DuckDBPyConnection, list[str]], Mapping[str, pa.Table]]


@dataclass(frozen=True)
class Family:
    """Roll-up tables computed together from one day's raw files and published in one swap;
    `merge` is, per table, the SQL over relations `stored` and `rolled` that merges them."""

    mark: str  # manifest mark prefix: `<mark>/<day>`
    tables: Mapping[str, pa.Schema]
    build: Build
    merge: Mapping[str, str]


def _files_sql(files: list[str]) -> str:
    listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
    return f"read_parquet([{listed}], hive_partitioning = false)"


_USAGE_KEY: Final = ("bucket_ts", "cluster", "host", "gpu_index", "job_id")
_USAGE_ORDER: Final = "ORDER BY host, gpu_index, bucket_ts"


def _query(files: list[str], unit: str) -> str:
    return (
        f"SELECT date_trunc('{unit}', ts) AS bucket_ts, cluster, host, gpu_index, job_id, "
        f"count(*) AS samples, {raw_usage_stats()} FROM {_files_sql(files)} "
        f"GROUP BY ALL {_USAGE_ORDER}"
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


def _health_queries(source: str) -> dict[str, str]:
    """The health family's tables from per-(minute, GPU, job) rows, or from earlier rows of the
    tables themselves: every statistic is a count, sum, min or max, so both give the same rows."""
    # Minutes sorted by time, so a reader of a window's edges prunes the rest by zone maps.
    minute = _combine_health(source, "minute") + " ORDER BY bucket_ts, host, gpu_index"
    hour = _combine_health(source, "hour") + " ORDER BY host, gpu_index, bucket_ts"
    # Sorted by job, so a job's page reads one row group of the index.
    jobs = (
        "SELECT date_trunc('day', bucket_ts) AS bucket_ts, job_id, cluster, host, gpu_index, "
        "min(first_ts) AS first_ts, max(last_ts) AS last_ts, sum(samples) AS samples "
        f"FROM {source} WHERE job_id IS NOT NULL GROUP BY ALL "
        "ORDER BY job_id, host, gpu_index"
    )
    series = ", ".join(
        f"sum({name}_sum) AS {name}_sum, sum({name}_n) AS {name}_n" for name in JOB_SERIES
    )
    job_minutes = (
        f"SELECT bucket_ts, job_id, cluster, host, gpu_index, sum(samples) AS samples, {series} "
        f"FROM {source} WHERE job_id IS NOT NULL GROUP BY ALL "
        "ORDER BY job_id, host, gpu_index, bucket_ts"
    )
    return {
        "gpu_health_1m": minute,
        "gpu_health_1h": hour,
        "gpu_jobs_1d": jobs,
        "gpu_jobs_1m": job_minutes,
    }


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
    try:
        return {
            table: conn.sql(query).to_arrow_table()
            for table, query in _health_queries("_health_job").items()
        }
    finally:
        conn.execute("DROP TABLE _health_job")


_PARTS: Final = "(SELECT * FROM stored UNION ALL BY NAME SELECT * FROM rolled)"

FAMILIES: Final[tuple[Family, ...]] = (
    Family(
        "rollup",
        {name: ROLLUP_SCHEMA for name in BUCKETS},
        _build_usage,
        {name: usage_merge_sql("stored", "rolled", _USAGE_KEY, _USAGE_ORDER) for name in BUCKETS},
    ),
    Family(
        "health_jobs",
        {
            "gpu_health_1m": HEALTH_SCHEMA,
            "gpu_health_1h": HEALTH_SCHEMA,
            "gpu_jobs_1d": JOBS_SCHEMA,
            "gpu_jobs_1m": JOB_MINUTES_SCHEMA,
        },
        _build_health,
        _health_queries(_PARTS),
    ),
)
ROLLUP_TABLES: Final[Mapping[str, pa.Schema]] = {
    name: table_schema for family in FAMILIES for name, table_schema in family.tables.items()
}

RETIRED_MARK: Final = "raw_retired"  # `raw_retired/<day>`: retention retired the day's raw rows


def input_mark(segments: list[Segment]) -> str:
    """What a family's mark `<family>/<day>` records of the raw segments its roll-ups hold: the
    highest sequence and the row count, both kept by compaction and both grown by a publish."""
    return f"{max(s.seq for s in segments)}:{sum(s.rows for s in segments)}"


def retired_key(day: str) -> str:
    return f"{RETIRED_MARK}/{day}"


def rolled_up(manifest: Manifest, day: str, raw: list[Segment]) -> bool:
    """Whether every family's roll-ups of `day` hold exactly the raw segments `raw`."""
    mark = input_mark(raw)
    return all(manifest.marks.get(f"{family.mark}/{day}") == mark for family in FAMILIES)


def raw_retired(manifest: Manifest, day: str, raw: list[Segment]) -> bool:
    """Whether retention retired raw rows of `day` that its roll-ups hold: then every raw segment
    of the day still live is late (none was rolled up, `_merge_late`). A day retired before the
    mark existed is known by its roll-ups holding more rows than it has raw."""
    if retired_key(day) in manifest.marks:
        return True
    rows = sum(s.rows for s in raw)
    return any(
        int(mark.rsplit(":", 1)[1]) > rows
        for family in FAMILIES
        if (mark := manifest.marks.get(f"{family.mark}/{day}"))
    )


def _legacy_retired(manifest: Manifest) -> dict[str, str]:
    """Retired marks for the days a build before them retired: roll-ups left, no raw segment."""
    families = {family.mark for family in FAMILIES}
    raw_days = manifest.by_date(SOURCE_TABLE)
    return {
        retired_key(day): "legacy"
        for family, _, day in (key.partition("/") for key in manifest.marks)
        if family in families and day not in raw_days and retired_key(day) not in manifest.marks
    }


def _connect() -> duckdb.DuckDBPyConnection:
    conn = duckdb.connect(":memory:")
    conn.execute("SET TimeZone = 'UTC'")
    conn.execute("SET threads = 1")  # background work: leave the cores to ingest
    conn.execute("SET enable_progress_bar = false")  # it would print into the server log
    return conn


def update_rollups(store: SegmentStore) -> int:
    """Roll up every (family, day) whose raw segments changed since; returns the days touched.

    A day whose raw rows retention retired keeps its roll-ups: its late raw segments are merged
    into them (`_merge_late`), never rolled up alone in their place.
    """
    try:
        rollup_format.upgrade(store, ROLLUP_TABLES)
    except Exception:  # readers read old files by name meanwhile: roll up the days regardless
        log.exception("roll-up files not brought to the current layout; next pass tries again")
    manifest = store.snapshot()
    if legacy := _legacy_retired(manifest):
        store.swap({}, marks=legacy)
        manifest = store.snapshot()
    done: set[str] = set()
    conn = _connect()
    try:
        for date, raw in sorted(manifest.by_date(SOURCE_TABLE).items()):
            if raw_retired(manifest, date, raw):
                if _merge_late(conn, store, manifest, date, raw):
                    done.add(date)
                continue
            for family in FAMILIES:
                if _roll_day(conn, store, manifest, family, date, raw):
                    done.add(date)
    finally:
        conn.close()
    return len(done)


def _roll_day(
    conn: duckdb.DuckDBPyConnection,
    store: SegmentStore,
    manifest: Manifest,
    family: Family,
    date: str,
    raw: list[Segment],
) -> bool:
    """Bring one family's roll-ups of `date` to its raw segments `raw`: only the segments they do
    not hold yet, added as parts (warehouse.read.rollup_delta), else the whole day again."""
    key, mark = f"{family.mark}/{date}", input_mark(raw)
    if manifest.marks.get(key) == mark:
        return False
    current = {table: manifest.by_date(table).get(date, []) for table in family.tables}
    new = rollup_delta.unrolled(manifest.marks.get(key), raw)
    if new is not None and not all(current.values()):
        new = None  # a table of the family has no rows of the day yet: roll it up whole
    seq = max(s.seq for s in raw)
    files = [str(store.path(s)) for s in (raw if new is None else new)]
    changes: dict[str, tuple[list[Segment], list[Segment]]] = {}
    try:
        for table, result in family.build(conn, files).items():
            schema = family.tables[table]
            rows = result.cast(schema)
            if new is None:
                changes[table] = (
                    current[table],
                    [rollup_format.write_rows(store, table, date, seq, rows)],
                )
            else:
                where = (table, date, seq)
                merge = family.merge[table]
                changes[table] = rollup_delta.add_part(
                    conn, store, where, rows, current[table], merge, schema
                )
    except BaseException:
        store.discard(s for _old, added in changes.values() for s in added)
        raise
    if store.swap(changes, marks={key: mark}):
        return True
    store.discard(s for _old, added in changes.values() for s in added)
    return False


def _merge_late(
    conn: duckdb.DuckDBPyConnection,
    store: SegmentStore,
    manifest: Manifest,
    day: str,
    raw: list[Segment],
) -> bool:
    """Merge the late raw segments `raw` of a retired `day` into every roll-up of the day, and
    retire them in the same swap: past retention, and held by the roll-ups from then on, so a
    re-run finds nothing to merge twice. A segment published meanwhile is not in `raw`: it stays
    live for the next pass."""
    files = [str(store.path(s)) for s in raw]
    seq = max(s.seq for s in raw)
    changes: dict[str, tuple[list[Segment], list[Segment]]] = {SOURCE_TABLE: (raw, [])}
    for family in FAMILIES:
        for table, result in family.build(conn, files).items():
            schema = family.tables[table]
            current = manifest.by_date(table).get(day, [])
            conn.register("stored", rollup_format.read_rows(store, current, schema))
            conn.register("rolled", result.cast(schema))
            try:
                merged = conn.sql(family.merge[table]).to_arrow_table().cast(schema)
            finally:
                conn.unregister("stored")
                conn.unregister("rolled")
            changes[table] = (current, [rollup_format.write_rows(store, table, day, seq, merged)])
    marks = {retired_key(day): manifest.marks.get(retired_key(day), "legacy")}
    if store.swap(changes, marks=marks):
        return True
    store.discard(s for table, (_old, new) in changes.items() for s in new)
    return False
