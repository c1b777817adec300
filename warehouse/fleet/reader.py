"""Read fleet-mode tables with DuckDB over a pruned Iceberg scan.

`connect(tables, start, end, clusters)` plans each table's scan with a row filter on the time
range (and clusters): Iceberg prunes whole partitions by `day(ts)` and `cluster`, then whole files
by their column statistics (min/max ts), so a worker reads only its partition's files. The rows
come back in the contract's exact Arrow schema and are registered in an in-memory DuckDB under
the same names the embedded reader uses (gpu_samples, host_samples, step_samples), so analyzers,
dashboard queries and `fleetscope warehouse query` run unchanged on either mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import duckdb
import pyarrow as pa

from fleetscope.contract import TABLES
from warehouse.fleet.tables import FleetTables, to_contract


@dataclass(frozen=True)
class ScanStats:
    """How much of a table a scan planned to read (the pruning at work)."""

    table: str
    files: int
    rows: int


def scan(
    tables: FleetTables,
    name: str,
    start: datetime,
    end: datetime,
    clusters: Sequence[str] | None = None,
) -> tuple[pa.Table, ScanStats]:
    """Rows of `name` with start <= ts < end (and cluster in `clusters`), contract schema."""
    table = tables.table(name)
    table.refresh()
    expr = f"ts >= '{start.isoformat()}' AND ts < '{end.isoformat()}'"
    if clusters is not None:
        quoted = ", ".join("'" + c.replace("'", "''") + "'" for c in clusters)
        expr += f" AND cluster IN ({quoted})"
    planned = table.scan(row_filter=expr)
    files = sum(1 for _ in planned.plan_files())
    data = to_contract(name, planned.to_arrow())
    return data, ScanStats(name, files, data.num_rows)


def connect(
    tables: FleetTables,
    start: datetime,
    end: datetime,
    clusters: Sequence[str] | None = None,
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the contract tables as they stand for [start, end)."""
    conn = duckdb.connect()
    conn.execute("SET TimeZone = 'UTC'")
    for name in TABLES:
        data, _ = scan(tables, name, start, end, clusters)
        conn.register(f"iceberg_{name}", data)
        conn.execute(f"CREATE TABLE {name} AS SELECT * FROM iceberg_{name}")
        conn.unregister(f"iceberg_{name}")
    return conn
