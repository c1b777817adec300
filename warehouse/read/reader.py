"""How everything but the writer reads telemetry: DuckDB views over the live Parquet segments.

`connect(settings)` works from any process while ingest writes at full rate: it opens an
in-memory DuckDB and defines one view per table (gpu_samples, host_samples, step_samples and the
roll-ups gpu_samples_1m, gpu_samples_1h, ...) over the files the manifest lists at that moment. It
never opens the telemetry DuckDB file, so it can neither block the writer nor be refused by its
lock (design.md). A connection sees the data as of its manifest; call `refresh` (or `connect`
again) for newer rows. Files compacted away stay readable for `warehouse.segment_grace_s`, so
refresh at least that often in a long-lived process.

Inside the server process, `Warehouse.cursor()` reads the writer's own database through a DuckDB
cursor instead (every committed row, no file listing), with the same table names.

This module must never write: not the database, not a segment, not the manifest.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

from fleetscope.contract import TABLES
from warehouse.read.rollup_format import mixed
from warehouse.read.rollups import ROLLUP_TABLES
from warehouse.storage import schema
from warehouse.storage.paths import WarehousePaths
from warehouse.storage.segments import Manifest, read_manifest

if TYPE_CHECKING:  # the server's handle (`Warehouse`) only names them; a reader needs neither
    from sqlalchemy import Engine

    from fleetscope.settings import Settings
    from warehouse.storage.segments import SegmentStore
    from warehouse.storage.writer import Writer

READ_TABLES: Mapping[str, pa.Schema] = {**TABLES, **ROLLUP_TABLES}
# Raw tables that gained columns in a later contract version (2: step_samples' FLOPs per step and
# dtype): segments written before lack them, so these are read by column name, null where a file
# has none. Only the step table, which is small beside gpu_samples: reading by name opens every
# file's footer when a query binds.
BY_NAME_TABLES: frozenset[str] = frozenset({"step_samples"})


def connect(settings: Settings) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with a view per table over the live segments; safe from any process."""
    return open_segments(WarehousePaths.from_settings(settings).segments_dir)


def open_segments(root: Path) -> duckdb.DuckDBPyConnection:
    conn = duckdb.connect(":memory:")
    conn.execute("SET TimeZone = 'UTC'")
    for name, table_schema in READ_TABLES.items():
        conn.execute(schema.create_table_sql(f"_empty_{name}", table_schema))
    refresh(conn, root)
    return conn


def refresh(conn: duckdb.DuckDBPyConnection, root: Path, *, temporary: bool = False) -> Manifest:
    """Point every view at the segments the manifest lists now; returns that manifest."""
    manifest = read_manifest(root)
    kind = "TEMP VIEW" if temporary else "VIEW"
    for name in READ_TABLES:
        if temporary and name in TABLES:
            continue
        conn.execute(f"CREATE OR REPLACE {kind} {name} AS {_select(root, manifest, name)}")
    return manifest


def _select(root: Path, manifest: Manifest, table: str) -> str:
    files = [str(root / s.path) for s in manifest.live(table)]
    if not files:
        return f"SELECT * FROM _empty_{table}"
    listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
    # No hive columns: the views have exactly the contract's columns, like the writer's tables.
    scan = f"SELECT * FROM read_parquet([{listed}], hive_partitioning = false"
    if table in BY_NAME_TABLES or (table in ROLLUP_TABLES and mixed(manifest)):
        # Roll-up files written before their table gained columns are read by name until the
        # roll-up step has rewritten them (warehouse.read.rollup_format); the empty table first keeps
        # every column of the layout, null where no file has it yet.
        return f"SELECT * FROM _empty_{table} UNION ALL BY NAME {scan}, union_by_name = true)"
    return f"{scan})"


class Warehouse:
    """The in-process read handle the server gives embedded analyzers and hooks."""

    def __init__(self, writer: Writer, store: SegmentStore, catalog: Engine) -> None:
        self._writer = writer
        self.store = store
        self.catalog = catalog

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor on the writer's database (raw tables) with roll-up views over segments."""
        cursor = self._writer.cursor()
        cursor.execute("SET TimeZone = 'UTC'")
        for name, table_schema in ROLLUP_TABLES.items():
            cursor.execute(
                schema.create_table_sql(f"_empty_{name}", table_schema).replace(
                    "CREATE TABLE", "CREATE TEMP TABLE", 1
                )
            )
        refresh(cursor, self.store.root, temporary=True)
        return cursor
