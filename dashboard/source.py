"""Where the dashboard and the reports read from: a read-only DuckDB over the warehouse, and the catalog.

The warehouse's own reader (`warehouse.reader`): views over the live sealed Parquet segments the
manifest under `warehouse.segments_dir` lists, one per contract table and roll-up. A table without
segments yet is an empty view of the right schema, so every page renders on an empty warehouse.

This module must never open the writer's DuckDB file, never write telemetry and never take a lock
that could block ingest: readers only ever see sealed, immutable Parquet files.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetscope.errors import ConfigError

if TYPE_CHECKING:
    import duckdb
    import sqlalchemy

    from fleetscope.settings import Settings


def _warehouse_reader() -> Any | None:
    """The warehouse stage's reader module when it exists (it owns the segment layout)."""
    try:
        return importlib.import_module("warehouse.reader")
    except ModuleNotFoundError:
        return None


def connect_segments(segments_dir: Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the warehouse's views (raw tables and roll-ups) over the live
    segments of `segments_dir`."""
    from warehouse.reader import open_segments

    return open_segments(segments_dir)


def connect(settings: Settings) -> duckdb.DuckDBPyConnection:
    """A read-only view of the telemetry warehouse (`warehouse.reader.connect`)."""
    from warehouse.paths import WarehousePaths

    segments_dir = WarehousePaths.from_settings(settings).segments_dir
    if segments_dir.exists() and not segments_dir.is_dir():
        raise ConfigError(f"warehouse.segments_dir {segments_dir} is not a folder")
    return connect_segments(segments_dir)


def catalog_engine(settings: Settings) -> sqlalchemy.Engine:
    """An engine on the catalog (jobs, hosts, findings, traces, profile requests, report runs)."""
    import sqlalchemy

    from warehouse.paths import WarehousePaths

    return sqlalchemy.create_engine(WarehousePaths.from_settings(settings).catalog_url)
