"""Where the dashboard and the reports read from: one telemetry source per `server.mode`, and the
catalog.

`SOURCES` is the registry, keyed by mode; `source_for(settings)` picks the deployment's entry, so
no page asks which mode it runs in. Each source answers the same few questions (`TelemetrySource`):
the newest sample, a DuckDB connection holding the contract tables (and the roll-ups it has) for a
time window under the embedded reader's names, the catalog engine, and what it lacks for a window,
which pages say instead of failing.

- embedded (`warehouse.read.reader`): views over the live sealed Parquet segments the manifest under
  `warehouse.segments_dir` lists, one per contract table and roll-up; one connection serves every
  window. A table without segments yet is an empty view of the right schema.
- fleet (`dashboard.fleet_source`): the Iceberg tables of `fleetscope server --mode fleet`, each
  window read through a pruned scan (`warehouse.fleet.reader`), the catalog in PostgreSQL.

This module must never open the writer's DuckDB file, never write telemetry and never take a lock
that could block ingest: readers only ever see sealed, immutable files.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from fleetscope.errors import ConfigError

if TYPE_CHECKING:
    import duckdb
    import sqlalchemy

    from fleetscope.settings import Settings

NO_SAMPLES = "The warehouse holds no GPU samples yet: start agents (or `fleetscope demo`)."


class TelemetrySource(Protocol):
    """One deployment's telemetry and catalog, as the pages read them."""

    # True when a connection holds only its window (a job is then looked for inside the window
    # picked in the sidebar); False when one connection sees every day.
    windowed: bool

    def scope(self, start: datetime | None, end: datetime | None) -> tuple[datetime, ...]:
        """What identifies the connection serving [start, end) (the cache key of its connection)."""
        ...

    def connect(self, scope: tuple[datetime, ...]) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB with gpu_samples, host_samples, step_samples (and the roll-ups the
        source has) for `scope`, under the embedded reader's table names."""
        ...

    def version(self) -> Hashable:
        """A token that changes whenever the data may have changed (a page's connection, newest
        sample and frames are cached under it): cheap, called on every page open."""
        ...

    def latest_sample(self) -> datetime | None:
        """Time of the newest GPU sample, None when there is none."""
        ...

    def catalog_engine(self) -> sqlalchemy.Engine:
        """An engine on the catalog (jobs, hosts, findings, traces, profile requests)."""
        ...

    def missing(self, start: datetime, end: datetime) -> list[str]:
        """What this source lacks for [start, end), one sentence each, for the page to say."""
        ...

    def no_samples(self) -> str:
        """What a page says when there is no GPU sample to show at all."""
        ...


def connect_segments(segments_dir: Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the warehouse's views (raw tables and roll-ups) over the live
    segments of `segments_dir`."""
    from warehouse.read.reader import open_segments

    return open_segments(segments_dir)


def connect(settings: Settings) -> duckdb.DuckDBPyConnection:
    """A read-only view of the embedded telemetry warehouse (`warehouse.read.reader.connect`)."""
    segments_dir = _segments_dir(settings)
    if segments_dir.exists() and not segments_dir.is_dir():
        raise ConfigError(f"warehouse.segments_dir {segments_dir} is not a folder")
    return connect_segments(segments_dir)


def _segments_dir(settings: Settings) -> Path:
    from warehouse.storage.paths import WarehousePaths

    return WarehousePaths.from_settings(settings).segments_dir


def manifest_version(segments_dir: Path) -> tuple[int, int, int] | None:
    """(inode, mtime ns, size) of the segment manifest, None while there is none: the writer
    replaces the file whole (`os.replace`), so any change of the live segments changes it."""
    from warehouse.storage.segments import MANIFEST_NAME

    try:
        found = os.stat(segments_dir / MANIFEST_NAME)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return (found.st_ino, found.st_mtime_ns, found.st_size)


def catalog_engine(settings: Settings) -> sqlalchemy.Engine:
    """An engine on the catalog (jobs, hosts, findings, traces, profile requests, report runs)."""
    import sqlalchemy

    from warehouse.storage.paths import WarehousePaths

    return sqlalchemy.create_engine(WarehousePaths.from_settings(settings).catalog_url)


class EmbeddedSource:
    """The single-box warehouse: one connection over the live segments serves every window."""

    windowed = False

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def scope(self, start: datetime | None, end: datetime | None) -> tuple[datetime, ...]:
        return ()

    def connect(self, scope: tuple[datetime, ...]) -> duckdb.DuckDBPyConnection:
        return connect(self.settings)

    def version(self) -> Hashable:
        """The manifest file's identity: every publish, compaction or roll-up swaps it atomically
        (a new inode), so an unchanged identity means the same live segments (one `stat`)."""
        return manifest_version(_segments_dir(self.settings))

    def latest_sample(self) -> datetime | None:
        from dashboard import data

        con = connect(self.settings)
        try:
            return data.latest_sample(con)
        finally:
            con.close()

    def catalog_engine(self) -> sqlalchemy.Engine:
        return catalog_engine(self.settings)

    def missing(self, start: datetime, end: datetime) -> list[str]:
        return []

    def no_samples(self) -> str:
        return NO_SAMPLES


def _fleet(settings: Settings) -> TelemetrySource:
    # Imported on use: pyiceberg is the fleet extra, an embedded dashboard never loads it.
    from dashboard.fleet_source import FleetSource

    return FleetSource(settings)


SOURCES: Mapping[str, Callable[[Settings], TelemetrySource]] = {
    "embedded": EmbeddedSource,
    "fleet": _fleet,
}


def source_for(settings: Settings) -> TelemetrySource:
    """The telemetry source of `settings.server.mode` (`SOURCES`)."""
    mode = settings.server.mode
    if mode not in SOURCES:
        raise ConfigError(f"server.mode must be one of {', '.join(SOURCES)}, got {mode!r}")
    return SOURCES[mode](settings)
