"""Where the warehouse keeps its files, resolved once from settings.

Every module that needs the telemetry database, the segment folder or the catalog URL asks this
module, so an empty setting means the same default everywhere. It must never create or open
anything: resolving a path has no side effects.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fleetscope.settings import Settings


@dataclass(frozen=True)
class WarehousePaths:
    duckdb_path: Path
    segments_dir: Path
    catalog_url: str

    @classmethod
    def from_settings(cls, settings: Settings) -> WarehousePaths:
        catalog_url = settings.warehouse.catalog_url
        if not catalog_url:
            sqlite_path = settings.path(settings.core.data_dir) / "catalog.sqlite"
            catalog_url = f"sqlite:///{sqlite_path}"
        return cls(
            duckdb_path=settings.path(settings.warehouse.duckdb_path, "telemetry.duckdb"),
            segments_dir=settings.path(settings.warehouse.segments_dir, "segments"),
            catalog_url=catalog_url,
        )
