"""`fleetscope server`: the embedded mode's store (DuckDB writer, segments, maintenance) on the
start-up both modes share (warehouse.ingest.startup.IngestProcess).

Start order: catalog, segment store, writer (opens and migrates DuckDB, republishes what a crash
left unpublished), HTTP listener, maintenance, then `on_start` hooks. The hooks come from the
installed `fleetscope.server` plug-ins that `server.plugins` selects (all by default; loaded by
warehouse.ingest.plugin_host, the fleet gateway's loader too): each one's `setup(server)` runs before
start and may append to the hook lists (fleetscope.plugins.ServerHooks).
Stop order is the reverse, and the writer flushes what is queued before it closes the database.
`on_trace_uploaded` hooks `(server, TraceUpload)` run on the profiling worker thread for each
stored trace. This module calls hooks and never names an analyzer; it must never handle a request
itself.
"""

from __future__ import annotations

import logging
from functools import partial

from fleetscope.settings import Settings
from warehouse import catalog
from warehouse.ingest.listener import listen_address
from warehouse.ingest.metrics import ServerMetrics
from warehouse.ingest.plugin_host import load_plugins
from warehouse.ingest.startup import IngestProcess
from warehouse.profiling.service import ProfilingConfig, ProfilingService
from warehouse.prometheus.remote_write import recent_scrapes
from warehouse.read.reader import Warehouse
from warehouse.storage.arrival_hook import ArrivalMarks
from warehouse.storage.catalog_sync import CatalogSync
from warehouse.storage.maintenance import Maintenance, MaintenanceConfig
from warehouse.storage.paths import WarehousePaths
from warehouse.storage.segments import SegmentStore
from warehouse.storage.writer import Writer, WriterConfig

log = logging.getLogger(__name__)

__all__ = ["Server", "load_plugins"]


class Server(IngestProcess):
    """The embedded mode: its store is the DuckDB writer and the segment store."""

    writer: Writer

    def __init__(
        self, settings: Settings, *, host: str | None = None, port: int | None = None
    ) -> None:
        self.settings = settings
        # Resolved before anything opens (DuckDB, the port): a selection naming a plug-in that is
        # missing or cannot run here fails with nothing left to close.
        plugin_setups = load_plugins(settings.server.plugins, mode="embedded")
        self.paths = WarehousePaths.from_settings(settings)
        self._init_hooks()
        self.catalog = catalog.connect(self.paths.catalog_url)
        self.store = SegmentStore(self.paths.segments_dir)
        self.writer = Writer(
            self.paths.duckdb_path,
            self.store,
            WriterConfig.from_settings(settings),
            hooks=[
                CatalogSync(self.catalog),
                ArrivalMarks(self.catalog, settings.analyzers.bucket_s),
                self._batch_committed,
            ],
        )
        self.warehouse = Warehouse(self.writer, self.store, self.catalog)
        self.metrics = ServerMetrics(self.writer, self.catalog)
        self.maintenance = Maintenance(
            self.store,
            self.writer,
            MaintenanceConfig(
                interval_s=settings.warehouse.maintenance_interval_s,
                target_bytes=settings.warehouse.compact_target_bytes,
                grace_s=settings.warehouse.segment_grace_s,
                retention_days=settings.warehouse.raw_retention_days,
                rollup_interval_s=settings.warehouse.rollup_interval_s,
            ),
        )
        self._serve(
            listen_address(settings, host, port),
            watermarks=partial(recent_scrapes, self.writer),
            profiling=lambda: ProfilingService(
                self.catalog,
                ProfilingConfig.from_settings(settings),
                notify=self._trace_uploaded,
                sole_server=True,  # its data folder is its own: what is left unanalysed is abandoned
            ),
            setups=plugin_setups,
        )

    def _start_upkeep(self) -> None:
        self.maintenance.start()

    def _stop_upkeep(self) -> None:
        self.maintenance.stop()
