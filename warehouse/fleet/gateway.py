"""`fleetscope server --mode fleet`: one ingest gateway, from the settings alone.

Run as many as the load needs behind a load balancer, or give agents the list of their URLs
(agent.ingest_url takes a comma-separated list and fails over). The only state a gateway holds
is its ingest log (`<core.data_dir>/gateway-log/<fleet.gateway_name or hostname-port>/`, locked
by the process): a batch is acknowledged once it is there (warehouse.fleet.writer), and a
gateway `kill -9`'d replays what it had not staged yet when it starts again with that name.
The start-up is both modes' (warehouse.ingest.startup.IngestProcess); this module supplies the
store: the writer, and the table committer (warehouse.fleet.committer) that appends every
gateway's staged files while this gateway holds a table's commit lock. Rows go to the Iceberg
tables through staged files, batch ids to the shared ledger, job
records, tokens, profile requests (changed by conditional updates, warehouse.profiling.transitions),
the agents' last polls (the profiling registry) and the arrival
marks that lead the scheduler to buckets receiving data (warehouse.storage.arrival_hook, stamped by
PostgreSQL's clock so every gateway's marks are ordered) to the catalog in PostgreSQL; uploaded
profiler traces to the object store (warehouse.fleet.trace_objects). Killing one
loses nothing that was acknowledged once it restarts on its disk; its unacknowledged batches are
retried by their agents on another gateway.
Same HTTP routes and answers as the embedded server (warehouse.ingest.server), remote_write included.
remote_write (warehouse.prometheus.remote_write) assembles each scrape in this gateway's memory, because
Prometheus spreads one scrape's series over several requests (its shards): every shard of one
Prometheus must therefore reach the same gateway. One Prometheus sends all its shards to the one
URL it is given: give each Prometheus one gateway's URL, or put the gateways behind a load
balancer with affinity by source address. The assembled rows go through this gateway's
FleetWriter under batch ids hashed from their (cluster, host, timestamp) keys, deduplicated by
the shared ledger; the restart watermark per target is read from the fleet's gpu_samples (a
projected Iceberg scan of the last 3 hours, warehouse.fleet.reader.newest_per_target), so a body
Prometheus re-sends across a restart, or to another gateway after this one died, is not stored
twice. If the affinity is broken and two gateways each receive part of one scrape, each stores
its part: per (host, GPU, timestamp), either one partial row (the two batches hash to the same
id and the ledger drops the second: its fields are lost) or two partial rows with disjoint
fields, whichever the request boundaries give (tests/fleet/test_fleet_remote_write.py). The
second case is counted by no one; the first shows as
`fleetscope_remote_write_already_stored_batches` on /metrics. Scrapes still waiting for their
remaining series live in memory only: a gateway killed loses at most those (about one scrape
interval per target it receives), which it had answered 204; a clean stop stores them.
Server plug-ins: the ones `server.plugins` selects that declare they run in fleet mode
(warehouse.ingest.plugin_host, the embedded server's loader), with the same hooks: a trace uploaded here
is analysed here, on this gateway's profiling worker thread; if this gateway stops first, another
takes the analysis over once its lease lapses (warehouse.profiling.analysis_leases). Selecting one that needs the embedded
server (its DuckDB warehouse) is a ConfigError before anything starts. A gateway has no in-process
warehouse (`warehouse` is None). This module must never open a DuckDB file.
"""

from __future__ import annotations

import fcntl
import logging
import socket
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, TypeVar

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from fleetscope.errors import ConfigError, FleetscopeError, SourceUnavailableError
from fleetscope.settings import Settings
from warehouse import catalog
from warehouse.catalog.base import database_clock
from warehouse.fleet.catalog_agent_registry import CatalogAgentRegistry
from warehouse.fleet.committer import TableCommitter
from warehouse.fleet.metrics import StagingCollector
from warehouse.fleet.reader import newest_per_target
from warehouse.fleet.tables import FleetConfig, FleetTables, ensure_bucket
from warehouse.fleet.trace_objects import ObjectTraceStorage
from warehouse.fleet.writer import FleetWriter
from warehouse.ingest.listener import listen_address
from warehouse.ingest.metrics import ServerMetrics
from warehouse.ingest.plugin_host import load_plugins
from warehouse.ingest.startup import IngestProcess
from warehouse.profiling.service import ProfilingConfig, ProfilingService
from warehouse.prometheus.remote_write import REPLAY_WINDOW_S
from warehouse.prometheus.rows import ScrapeKey
from warehouse.storage.arrival_hook import ArrivalMarks
from warehouse.storage.catalog_sync import CatalogSync
from warehouse.storage.group_writer import WriterConfig

log = logging.getLogger(__name__)
T = TypeVar("T")


def _without_password(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def _reach(setting: str, target: str, step: Callable[[], T]) -> T:
    """`step()`, or one line naming the setting to fix when what it names cannot be reached.

    Why: a wrong PostgreSQL port or login printed a 128-line traceback from SQLAlchemy and the
    driver (issue 28); the operator needs the setting and the first line of the reason.
    """
    try:
        return step()
    except FleetscopeError:
        raise
    except Exception as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        reason = lines[0] if lines else type(exc).__name__
        raise SourceUnavailableError(
            f"fleet gateway cannot reach {target} ({setting}): {reason[:300]}"
        ) from exc


def _lock_log(log_dir: Path) -> IO[bytes]:
    """Hold `log_dir` for this process (released when it exits, `kill -9` included): two
    gateways appending to one ingest log would corrupt it."""
    log_dir.mkdir(parents=True, exist_ok=True)
    handle = open(log_dir / ".lock", "wb")  # noqa: SIM115 (held until stop)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        handle.close()
        raise ConfigError(
            f"ingest log {log_dir} is in use by another gateway; give each gateway its own "
            "fleet.gateway_name (or port)"
        ) from exc
    return handle


class Gateway(IngestProcess):
    """The fleet mode: its store is the local ingest log, staged files and the table committer."""

    role = "fleet gateway"
    writer: FleetWriter

    def __init__(
        self, settings: Settings, *, host: str | None = None, port: int | None = None
    ) -> None:
        self.settings = settings
        setups = load_plugins(
            settings.server.plugins, mode="fleet"
        )  # refused before anything opens
        self._init_hooks()
        self.warehouse = None  # no in-process read handle: plug-ins needing one are embedded-only
        self.config = config = FleetConfig.from_settings(settings)
        where_catalog = ("warehouse.catalog_url", _without_password(config.catalog_url))
        self.catalog = _reach(*where_catalog, lambda: catalog.connect(config.catalog_url))
        where_s3 = ("fleet.s3_endpoint", config.s3_endpoint or config.warehouse_uri)
        _reach(*where_s3, lambda: ensure_bucket(config))
        tables = _reach(*where_catalog, lambda: FleetTables(config))
        address = listen_address(settings, host, port)
        self.name = settings.fleet.gateway_name or f"{socket.gethostname()}-{address[1]}"
        if not settings.fleet.gateway_name and not address[1]:  # port 0: a name of its own
            self.name = f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"
        log_dir = Path(settings.core.data_dir) / "gateway-log" / self.name
        self._log_lock = _lock_log(log_dir)
        self.writer = FleetWriter(
            tables,
            self.catalog,
            WriterConfig.from_settings(settings),
            gateway=self.name,
            log_dir=log_dir,
            hooks=[
                CatalogSync(self.catalog),  # hosts and GPU allocations, as the embedded server
                ArrivalMarks(
                    self.catalog, settings.analyzers.bucket_s, clock=database_clock(self.catalog)
                ),
                self._batch_committed,
            ],
        )
        self.committer = TableCommitter(
            tables,
            self.catalog,
            interval_s=settings.fleet.commit_interval_s,
            attempts=settings.fleet.commit_attempts,
            gateway=self.name,
            raw_retention_days=settings.warehouse.raw_retention_days,
        )
        self.metrics = ServerMetrics(self.writer, component="gateway")
        self.metrics.registry.register(StagingCollector(self.writer, self.committer))
        self._serve(
            address,
            watermarks=self._stored_scrapes,
            profiling=lambda: ProfilingService(
                self.catalog,
                ProfilingConfig.from_settings(settings),
                notify=self._trace_uploaded,
                registry=CatalogAgentRegistry(self.catalog),
                storage=ObjectTraceStorage.from_settings(settings),  # any gateway reads any trace
            ),
            setups=setups,
        )

    def _start_upkeep(self) -> None:
        self.committer.start()

    def _after_writer_stop(self) -> None:
        self.committer.stop()  # the log is staged: commit it, for the tables this gateway holds
        self._log_lock.close()

    def _stored_scrapes(self) -> dict[ScrapeKey, int]:
        """remote_write's restart watermark: the newest stored timestamp per target over the
        replay window, from the fleet's gpu_samples (any gateway's rows)."""
        since = datetime.now(UTC) - timedelta(seconds=REPLAY_WINDOW_S)
        return newest_per_target(self.writer.tables, since)
