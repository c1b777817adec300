"""`fleetscope server --mode fleet`: one stateless ingest gateway, from the settings alone.

Run as many as the load needs behind a load balancer, or give agents the list of their URLs
(agent.ingest_url takes a comma-separated list and fails over). A gateway holds no state of its
own: rows go to the Iceberg tables (warehouse.fleet.writer), batch ids to the shared ledger, job
records, tokens, profile requests (changed by conditional updates, warehouse.profile_transitions),
the agents' last polls (the profiling registry) and the arrival
marks that lead the scheduler to buckets receiving data (warehouse.arrivals, stamped by
PostgreSQL's clock so every gateway's marks are ordered) to the catalog in PostgreSQL; uploaded
profiler traces to the object store (warehouse.fleet.trace_objects). Killing one
loses nothing that was acknowledged; its unacknowledged batches are retried by their agents on
another gateway.
Same HTTP routes and answers as the embedded server (warehouse.server), except remote_write,
which needs one receiver per Prometheus (it assembles scrapes in memory) and stays embedded-only.
Server plug-ins: the ones `server.plugins` selects that declare they run in fleet mode
(warehouse.plugin_host, the embedded server's loader), with the same hooks: a trace uploaded here
is analysed here, on this gateway's profiling worker thread; if this gateway stops first, another
takes the analysis over once its lease lapses (warehouse.analysis_leases). Selecting one that needs the embedded
server (its DuckDB warehouse) is a ConfigError before anything starts. A gateway has no in-process
warehouse (`warehouse` is None). This module must never open a DuckDB file.
"""

from __future__ import annotations

import logging

from fleetscope.settings import Settings
from warehouse import catalog
from warehouse.arrivals import ArrivalMarks
from warehouse.auth import TokenChecker
from warehouse.catalog.base import database_clock
from warehouse.catalog_sync import CatalogSync
from warehouse.fleet.agent_registry import CatalogAgentRegistry
from warehouse.fleet.tables import FleetConfig, FleetTables, ensure_bucket
from warehouse.fleet.trace_objects import ObjectTraceStorage
from warehouse.fleet.writer import FleetWriter
from warehouse.listener import Listening, bind, listen_address, tls_from
from warehouse.metrics import ServerMetrics
from warehouse.plugin_host import PluginHost, load_plugins
from warehouse.profiling_service import ProfilingConfig, ProfilingService
from warehouse.security import check_exposure, effective_tokens
from warehouse.server import Ingest, IngestConfig

log = logging.getLogger(__name__)


class Gateway(PluginHost, Listening):
    def __init__(
        self, settings: Settings, *, host: str | None = None, port: int | None = None
    ) -> None:
        self.settings = settings
        setups = load_plugins(
            settings.server.plugins, mode="fleet"
        )  # refused before anything opens
        self._init_hooks()
        self.warehouse = None  # no in-process read handle: plug-ins needing one are embedded-only
        self.config = FleetConfig.from_settings(settings)
        self.catalog = catalog.connect(self.config.catalog_url)
        ensure_bucket(self.config)
        self.writer = FleetWriter(
            FleetTables(self.config),
            self.catalog,
            flush_rows=settings.warehouse.flush_rows,
            flush_interval_s=settings.warehouse.flush_interval_s,
            flush_idle_s=settings.warehouse.flush_idle_s,
            queue_max_rows=settings.warehouse.queue_max_rows,
            lease_s=settings.fleet.lease_s,
            commit_attempts=settings.fleet.commit_attempts,
            hooks=[
                CatalogSync(self.catalog),  # hosts and GPU allocations, as the embedded server
                ArrivalMarks(
                    self.catalog, settings.analyzers.bucket_s, clock=database_clock(self.catalog)
                ),
                self._batch_committed,
            ],
        )
        self.metrics = ServerMetrics(self.writer)
        address = listen_address(settings, host, port)
        tokens = effective_tokens(settings)  # the embedded server's rules: no public default
        check_exposure(address[0], tokens)
        tls = tls_from(settings)
        self.profiling = ProfilingService(
            self.catalog,
            ProfilingConfig.from_settings(settings),
            notify=self._trace_uploaded,
            registry=CatalogAgentRegistry(self.catalog),
            storage=ObjectTraceStorage.from_settings(settings),  # any gateway reads any trace
        )
        ingest = Ingest(
            writer=self.writer,
            catalog=self.catalog,
            auth=TokenChecker(tokens, self.catalog),
            metrics=self.metrics,
            config=IngestConfig.from_settings(settings),
            profiling=self.profiling,
        )
        self.http = bind(address, ingest, tls)
        for setup in setups:
            setup(self)

    def start(self) -> None:
        self.writer.start()
        self._serve_http()
        self.profiling.start()
        self._started()
        log.info("fleet gateway listening on %s", self.url)

    def stop(self) -> None:
        self._stopping()
        self._close_http()
        self.profiling.stop()
        self.writer.stop()
        self.catalog.dispose()
