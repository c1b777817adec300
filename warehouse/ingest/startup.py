"""The start-up both server modes share: a writer (their store), then the same HTTP side.

Why one: `warehouse/ingest/runtime.py` (the embedded server) and `warehouse/fleet/gateway.py` (a
fleet gateway) repeated the token checks, the remote_write receiver, the profiling service, the
Ingest handler, the listener, the plug-in set-ups and the start and stop orders, and drifted
(issue 27). A mode now builds its catalog, its writer and its metrics, then calls `_serve`; it
supplies only what differs: the remote_write restart watermark, the profiling service's
storage, and what runs beside the writer (`_start_upkeep`/`_stop_upkeep`: the embedded
maintenance; `_after_writer_stop`: a gateway's last commit pass). Start: writer, HTTP,
remote_write, upkeep, profiling, then the plug-ins' on_start hooks; stop is the reverse, and the
writer flushes what is queued before it closes its store. This module must never handle a
request itself nor name a store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from fleetscope.errors import ConfigError
from warehouse.catalog.fleet import HostClusters
from warehouse.ingest.auth import TokenChecker
from warehouse.ingest.listener import Address, Listening, bind, tls_from
from warehouse.ingest.plugin_host import PluginHost
from warehouse.ingest.security import check_exposure, effective_tokens, read_tokens
from warehouse.ingest.server import Ingest, IngestConfig
from warehouse.prometheus.remote_write import RemoteWrite
from warehouse.prometheus.remote_write_metrics import RemoteWriteCollector
from warehouse.prometheus.rows import ScrapeKey

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from fleetscope.plugins import ServerPlugin
    from fleetscope.settings import Settings
    from warehouse.ingest.metrics import ServerMetrics
    from warehouse.profiling.service import ProfilingService
    from warehouse.storage.group_writer import GroupWriter

log = logging.getLogger(__name__)

__all__ = ["IngestProcess"]


class IngestProcess(PluginHost, Listening):
    """A server process of either mode; a subclass sets the attributes below, then `_serve`."""

    role = "ingest"  # in the start-up log line
    settings: Settings
    warehouse: Any  # the embedded read handle (warehouse.read.reader.Warehouse); None on a gateway
    catalog: Engine
    writer: GroupWriter
    metrics: ServerMetrics

    def _serve(
        self,
        address: Address,
        *,
        watermarks: Callable[[], dict[ScrapeKey, int]],
        profiling: Callable[[], ProfilingService],
        setups: Sequence[ServerPlugin],
    ) -> None:
        """The HTTP side on `address`, then the plug-ins' set-ups; the writer (not started yet)
        is stopped again if the address or its exposure is refused."""
        settings = self.settings
        tokens = effective_tokens(settings)  # no public default in either mode
        try:
            check_exposure(address[0], tokens + read_tokens(settings))  # read tokens too
            tls = tls_from(settings)
        except ConfigError:
            self.writer.stop()
            raise
        self.auth = TokenChecker(tokens, self.catalog, read_tokens=read_tokens(settings))
        self.remote_write = RemoteWrite.from_settings(
            self.writer, settings, watermarks=watermarks, known_cluster=HostClusters(self.catalog)
        )
        self.metrics.registry.register(RemoteWriteCollector(self.remote_write))
        self.profiling = profiling()
        ingest = Ingest(
            writer=self.writer,
            catalog=self.catalog,
            auth=self.auth,
            metrics=self.metrics,
            config=IngestConfig.from_settings(settings),
            remote_write=self.remote_write,
            profiling=self.profiling,
            routes=self.routes,
        )
        try:
            self.http = bind(address, ingest, tls)
        except ConfigError:
            self.writer.stop()
            raise
        for setup in setups:
            setup(self)

    def start(self) -> None:
        self.writer.start()
        self._serve_http()
        self.remote_write.start()
        self._start_upkeep()
        self.profiling.start()
        self._started()
        log.info("%s listening on %s", self.role, self.url)

    def stop(self) -> None:
        self._stopping()
        self._close_http()
        self.remote_write.stop()  # stores waiting scrapes while the writer still runs
        self.profiling.stop()  # lets the trace being analyzed finish
        self._stop_upkeep()
        self.writer.stop()
        self._after_writer_stop()
        self.catalog.dispose()

    def _start_upkeep(self) -> None:
        """What runs beside the writer (the embedded maintenance, a gateway's committer)."""

    def _stop_upkeep(self) -> None:
        """Stopped before the writer (the embedded maintenance calls into it)."""

    def _after_writer_stop(self) -> None:
        """After the writer flushed (a gateway's last commit pass)."""
