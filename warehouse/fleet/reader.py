"""Read fleet-mode tables with DuckDB over a pruned Iceberg scan.

`connect(tables, start, end, clusters)` plans each table's scan with a row filter on the time
range (and clusters): Iceberg prunes whole partitions by `day(ts)` and `cluster`, then whole files
by their column statistics (min/max ts), so a worker reads only its partition's files. The rows
come back in the contract's exact Arrow schema and are registered in an in-memory DuckDB under
the same names the embedded reader uses (gpu_samples, host_samples, step_samples), so analyzers,
dashboard queries and `fleetscope warehouse query` run unchanged on either mode. `clusters` lists
the clusters holding data in a time range from the partition metadata alone (manifests, no data
file is opened), which is how a scheduled window is cut per (day, cluster).

A cluster of None stands for rows without a cluster label (their own Iceberg partition).

Rows a gateway acknowledged are readable before its table's committer appends them: `scan`,
`clusters` and `newest_per_target` add the staged data files the scanned snapshot does not hold
yet (warehouse.catalog.staging: files not committed and not in its snapshots, or committed by a
snapshot newer than its own, by sequence number), so rows are readable about one ingest-log flush
(`warehouse.log_flush_interval_s`, 1 s) after their 202, whatever `fleet.commit_interval_s` is.
Why read them rather than commit more often: a commit per second per table is what made the
small files and the snapshot churn; staged files are few (one per gateway, partition and flush)
and recent, so reading them costs a listing query and a few small GETs.

`newest_per_target` is the remote_write receiver's restart watermark (warehouse.prometheus.remote_write):
the same pruned scan, projected to (cluster, host, ts) and reduced batch by batch, so a gateway
reads three columns of the replay window and never holds its rows at once.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from fleetscope.contract import TABLES
from warehouse.catalog import staging
from warehouse.fleet.tables import FLUSH_PROPERTY, FleetTables, to_contract

if TYPE_CHECKING:
    from pyiceberg.table import Table

_TARGET = ("cluster", "host", "ts")


@dataclass(frozen=True)
class ScanStats:
    """How much of a table a scan planned to read (the pruning at work)."""

    table: str
    files: int
    rows: int
    clusters: tuple[str | None, ...] = ()  # the distinct clusters of the rows read

    def to_dict(self) -> dict[str, object]:
        return {
            "table": self.table,
            "files": self.files,
            "rows": self.rows,
            "clusters": list(self.clusters),
        }


def _time_filter(start: datetime, end: datetime) -> str:
    return f"ts >= '{start.isoformat()}' AND ts < '{end.isoformat()}'"


def cluster_filter(clusters: Sequence[str | None]) -> str:
    named = [c for c in clusters if c is not None]
    terms = []
    if named:
        terms.append(
            "cluster IN (" + ", ".join("'" + c.replace("'", "''") + "'" for c in named) + ")"
        )
    if len(named) < len(clusters):
        terms.append("cluster IS NULL")
    return "(" + " OR ".join(terms) + ")" if terms else "false"


def scan(
    tables: FleetTables,
    name: str,
    start: datetime,
    end: datetime,
    clusters: Sequence[str | None] | None = None,
) -> tuple[pa.Table, ScanStats]:
    """Rows of `name` with start <= ts < end (and cluster in `clusters`), contract schema."""
    table = tables.table(name)
    table.refresh()
    expr = _time_filter(start, end)
    if clusters is not None:
        expr += " AND " + cluster_filter(clusters)
    planned = table.scan(row_filter=expr)
    files = sum(1 for _ in planned.plan_files())
    data = to_contract(name, planned.to_arrow())
    staged = staged_rows(tables, table, name, start, end)
    if staged is not None:
        if clusters is not None:
            staged = staged.filter(_in_clusters(staged, clusters))
        data = pa.concat_tables([data, to_contract(name, staged)])
    seen = tuple(
        sorted(
            pc.unique(data.column("cluster")).to_pylist(), key=lambda c: (c is not None, c or "")
        )
    )
    return data, ScanStats(name, files, data.num_rows, seen)


def staged_rows(
    tables: FleetTables,
    table: Table,
    name: str,
    start: datetime,
    end: datetime,
    columns: Sequence[str] | None = None,
) -> pa.Table | None:
    """Rows with start <= ts < end of the staged files `table`'s metadata (refreshed by the
    caller, before this) does not hold; None when there are none."""
    import pyarrow.parquet as pq
    from sqlalchemy.exc import DBAPIError

    in_snapshots = {
        str(s.summary.get(FLUSH_PROPERTY))
        for s in table.metadata.snapshots
        if s.summary is not None and s.summary.get(FLUSH_PROPERTY)
    }
    current = table.current_snapshot()
    sequence = 0 if current is None or current.sequence_number is None else current.sequence_number
    try:
        with tables.catalog.engine.connect() as conn:
            paths = staging.readable(conn, name, start, end, in_snapshots, sequence)
    except DBAPIError:  # no gateway made the staging table yet: nothing staged
        return None
    if not paths:
        return None
    wanted = None if columns is None else list(dict.fromkeys([*columns, "ts"]))
    parts = []
    for path in sorted(paths):
        with table.io.new_input(path).open() as stream:
            part = pq.read_table(stream, columns=wanted)
        part = part.replace_schema_metadata(None)
        ts = part.column("ts")
        keep = pc.and_(
            pc.greater_equal(ts, pa.scalar(start, ts.type)), pc.less(ts, pa.scalar(end, ts.type))
        )
        parts.append(part.filter(keep))
    arrow_schema = table.schema().as_arrow()
    if wanted is not None:
        arrow_schema = pa.schema([arrow_schema.field(c) for c in wanted])
    return pa.concat_tables([p.cast(arrow_schema) for p in parts])


def _in_clusters(data: pa.Table, clusters: Sequence[str | None]) -> pa.ChunkedArray:
    column = data.column("cluster")
    named = pa.array([c for c in clusters if c is not None], pa.string())
    mask = pc.is_in(column, value_set=named)
    if None in clusters:
        mask = pc.or_(pc.fill_null(mask, False), pc.is_null(column))
    return pc.fill_null(mask, False)


def newest_per_target(tables: FleetTables, since: datetime) -> dict[tuple[str, str], int]:
    """Newest gpu_samples `ts` (epoch ms) per (cluster, host) at or after `since`; a row without a
    cluster counts under '' (as the embedded server's watermark read, `coalesce(cluster, '')`)."""
    table = tables.table("gpu_samples")
    table.refresh()
    planned = table.scan(row_filter=f"ts >= '{since.isoformat()}'", selected_fields=_TARGET)
    newest: dict[tuple[str, str], int] = {}
    staged = staged_rows(
        tables, table, "gpu_samples", since, datetime.max.replace(tzinfo=UTC), _TARGET
    )
    batches = itertools.chain(
        planned.to_arrow_batch_reader(), [] if staged is None else staged.to_batches()
    )
    for batch in batches:
        if batch.num_rows == 0:
            continue
        grouped = pa.Table.from_batches([batch]).group_by(["cluster", "host"])
        reduced = grouped.aggregate([("ts", "max")])
        columns = (
            reduced.column("cluster").to_pylist(),
            reduced.column("host").to_pylist(),
            pc.cast(reduced.column("ts_max"), pa.int64()).to_pylist(),  # microseconds
        )
        for cluster, host, ts_us in zip(*columns, strict=True):
            key = (cluster or "", str(host))
            ts_ms = int(ts_us) // 1000
            if newest.get(key, -1) < ts_ms:
                newest[key] = ts_ms
    return newest


def clusters(tables: FleetTables, start: datetime, end: datetime) -> list[str | None]:
    """The clusters with data files for [start, end) in any contract table, from the partition
    metadata (the manifests' partition values pruned by the time filter; no data file read).
    Sorted, None (rows without a cluster) first."""
    found: set[str | None] = set()
    for name in TABLES:
        table = tables.table(name)
        table.refresh()
        for task in table.scan(row_filter=_time_filter(start, end)).plan_files():
            value = task.file.partition[1]  # the spec: day(ts), then identity(cluster)
            found.add(None if value is None else str(value))
        staged = staged_rows(tables, table, name, start, end, ("cluster",))
        if staged is not None:
            found.update(pc.unique(staged.column("cluster")).to_pylist())
    return sorted(found, key=lambda c: (c is not None, c or ""))


def open_scan(
    tables: FleetTables,
    start: datetime,
    end: datetime,
    clusters: Sequence[str | None] | None = None,
) -> tuple[duckdb.DuckDBPyConnection, list[ScanStats]]:
    """An in-memory DuckDB with the contract tables as they stand for [start, end), and what each
    table's scan read (a task reports it, so its reads can be checked)."""
    conn = duckdb.connect()
    conn.execute("SET TimeZone = 'UTC'")
    stats = []
    for name in TABLES:
        data, read = scan(tables, name, start, end, clusters)
        conn.register(f"iceberg_{name}", data)
        conn.execute(f"CREATE TABLE {name} AS SELECT * FROM iceberg_{name}")
        conn.unregister(f"iceberg_{name}")
        stats.append(read)
    return conn, stats


def connect(
    tables: FleetTables,
    start: datetime,
    end: datetime,
    clusters: Sequence[str | None] | None = None,
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the contract tables as they stand for [start, end)."""
    return open_scan(tables, start, end, clusters)[0]
