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

`newest_per_target` is the remote_write receiver's restart watermark (warehouse.prometheus.remote_write):
the same pruned scan, projected to (cluster, host, ts) and reduced batch by batch, so a gateway
reads three columns of the replay window and never holds its rows at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from fleetscope.contract import TABLES
from warehouse.fleet.tables import FleetTables, to_contract


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
    seen = tuple(
        sorted(
            pc.unique(data.column("cluster")).to_pylist(), key=lambda c: (c is not None, c or "")
        )
    )
    return data, ScanStats(name, files, data.num_rows, seen)


def newest_per_target(tables: FleetTables, since: datetime) -> dict[tuple[str, str], int]:
    """Newest gpu_samples `ts` (epoch ms) per (cluster, host) at or after `since`; a row without a
    cluster counts under '' (as the embedded server's watermark read, `coalesce(cluster, '')`)."""
    table = tables.table("gpu_samples")
    table.refresh()
    planned = table.scan(
        row_filter=f"ts >= '{since.isoformat()}'", selected_fields=("cluster", "host", "ts")
    )
    newest: dict[tuple[str, str], int] = {}
    for batch in planned.to_arrow_batch_reader():
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
