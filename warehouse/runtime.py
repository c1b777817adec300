"""`fleetscope server`: assembles the writer, the HTTP server, maintenance and plug-in hooks.

Start order: catalog, segment store, writer (opens and migrates DuckDB, republishes what a crash
left unpublished), HTTP listener, maintenance, then `on_start` hooks. The hooks come from the
installed `fleetscope.server` plug-ins that `server.plugins` selects (all by default): each one's
`setup(server)` runs before start and may append to the hook lists (fleetscope.plugins.ServerHooks).
Stop order is the reverse, and the writer flushes what is queued before it closes the database.
`on_trace_uploaded` hooks `(server, TraceUpload)` run on the profiling worker thread for each
stored trace. This module calls hooks and never names an analyzer; it must never handle a request
itself.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable

from fleetscope import plugins
from fleetscope.errors import ConfigError
from fleetscope.settings import Settings
from warehouse import catalog
from warehouse.arrivals import ArrivalMarks
from warehouse.auth import TokenChecker
from warehouse.catalog.fleet import HostClusters
from warehouse.catalog_sync import CatalogSync
from warehouse.listener import Listening, bind, listen_address, tls_from
from warehouse.maintenance import Maintenance, MaintenanceConfig
from warehouse.metrics import ServerMetrics
from warehouse.paths import WarehousePaths
from warehouse.profiling_service import ProfilingConfig, ProfilingService, TraceUpload
from warehouse.reader import Warehouse
from warehouse.remote_write import RemoteWrite
from warehouse.security import check_exposure, effective_tokens
from warehouse.segments import SegmentStore
from warehouse.server import Ingest, IngestConfig
from warehouse.writer import Commit, Writer

log = logging.getLogger(__name__)

Hook = Callable[["Server"], None]
TraceHook = Callable[["Server", TraceUpload], None]
CommitPluginHook = Callable[["Server", Commit], None]


class Server(Listening):
    def __init__(
        self, settings: Settings, *, host: str | None = None, port: int | None = None
    ) -> None:
        self.settings = settings
        self.paths = WarehousePaths.from_settings(settings)
        self.on_start: list[Hook] = []
        self.on_stop: list[Hook] = []
        self.on_trace_uploaded: list[TraceHook] = []
        self.on_batch_committed: list[CommitPluginHook] = []
        self.catalog = catalog.connect(self.paths.catalog_url)
        self.store = SegmentStore(self.paths.segments_dir)
        self.writer = Writer(
            self.paths.duckdb_path,
            self.store,
            flush_rows=settings.warehouse.flush_rows,
            flush_interval_s=settings.warehouse.flush_interval_s,
            flush_idle_s=settings.warehouse.flush_idle_s,
            queue_max_rows=settings.warehouse.queue_max_rows,
            hooks=[
                CatalogSync(self.catalog),
                ArrivalMarks(self.catalog, settings.analyzers.bucket_s),
                self._batch_committed,
            ],
        )
        self.warehouse = Warehouse(self.writer, self.store, self.catalog)
        self.metrics = ServerMetrics(self.writer, self.catalog)
        address = listen_address(settings, host, port)
        tokens = effective_tokens(settings)
        try:
            check_exposure(address[0], tokens)
            tls = tls_from(settings)
        except ConfigError:
            self.writer.stop()
            raise
        self.auth = TokenChecker(tokens, self.catalog)
        self.remote_write = RemoteWrite(
            self.writer,
            default_cluster=settings.server.prometheus_cluster,
            hold_s=settings.server.remote_write_hold_s,
            commit_timeout_s=settings.warehouse.commit_timeout_s,
            max_uncompressed_bytes=settings.server.max_body_bytes,
            registry=self.metrics.registry,
            known_cluster=HostClusters(self.catalog),
        )
        self.profiling = ProfilingService(
            self.catalog, ProfilingConfig.from_settings(settings), notify=self._trace_uploaded
        )
        ingest = Ingest(
            writer=self.writer,
            catalog=self.catalog,
            auth=self.auth,
            metrics=self.metrics,
            config=IngestConfig.from_settings(settings),
            remote_write=self.remote_write,
            profiling=self.profiling,
        )
        try:
            self.http = bind(address, ingest, tls)
        except ConfigError:
            self.writer.stop()
            raise
        self.maintenance = Maintenance(
            self.store,
            self.writer,
            MaintenanceConfig(
                interval_s=settings.warehouse.maintenance_interval_s,
                target_bytes=settings.warehouse.compact_target_bytes,
                grace_s=settings.warehouse.segment_grace_s,
                retention_days=settings.warehouse.raw_retention_days,
            ),
        )
        for setup in load_plugins(settings.server.plugins):
            setup(self)

    def _batch_committed(self, commit: Commit) -> None:
        """Run every on_batch_committed hook (the writer logs a failing one; rows stay committed)."""
        for hook in self.on_batch_committed:
            hook(self, commit)

    def _trace_uploaded(self, upload: TraceUpload) -> bool:
        """Run every on_trace_uploaded hook; False when none is registered (nothing analyzes)."""
        for hook in self.on_trace_uploaded:
            hook(self, upload)
        return bool(self.on_trace_uploaded)

    def start(self) -> None:
        self.writer.start()
        self._serve_http()
        self.remote_write.start()
        self.maintenance.start()
        self.profiling.start()
        for hook in self.on_start:
            hook(self)
        log.info("ingest listening on %s", self.url)

    def stop(self) -> None:
        for hook in reversed(self.on_stop):
            try:
                hook(self)
            except Exception:
                log.exception("on_stop hook %r failed", hook)
        self._close_http()
        self.remote_write.stop()  # stores waiting scrapes while the writer still runs
        self.profiling.stop()  # lets the trace being analyzed finish
        self.maintenance.stop()
        self.writer.stop()
        self.catalog.dispose()


def load_plugins(spec: str) -> list[plugins.ServerPlugin]:
    """The `setup(server)` of each plug-in `server.plugins` selects (`*`: every installed one,
    `-name`: leave one out; fleetscope.plugins.select_names), in plug-in order (`PLUGIN_ORDER`,
    then name) whichever way each was selected, so a hook that reads what another stored runs
    after it."""
    words = {word.strip() for word in spec.split(",")}
    installed = plugins.required(plugins.SERVER) if plugins.ALL in words else {}
    names = plugins.select_names(spec, list(installed))
    return [setup for _, setup in plugins.sort_loaded((n, load_plugin(n)) for n in names)]


def load_plugin(module: str) -> plugins.ServerPlugin:
    """A `server.plugins` name's `setup(server)`: an entry point of the group `fleetscope.server`
    (how the analyzers register theirs, as any third party would), else a module of that name."""
    try:
        registered = plugins.registered(plugins.SERVER)
        if module in registered:
            setup = registered[module].load()
        else:
            setup = importlib.import_module(module).setup
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"server.plugins: cannot load {module}.setup: {exc}") from exc
    if not callable(setup):
        raise ConfigError(f"server.plugins: {module}.setup is not callable")
    hook: plugins.ServerPlugin = setup
    return hook
