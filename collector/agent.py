"""The long-running agent: scrape every agent.interval_s, attribute, add host metrics, spool, ship.

Threads: the loop (scrape -> normalize -> attribute -> batch -> spool) runs on the caller's thread;
the shipper drains the spool on its own thread, so a slow or dead ingest never delays a scrape;
the metrics server answers /metrics and /healthz on a third; `workers` (the on-demand profiling
relay, collector.sdk_wiring) run on their own. `row_sources` add rows of other tables to each tick
(step_samples drained from the training-process SDK) through the same batcher and spool. Ticks are scheduled on a fixed grid
(start + k * interval) from an injected monotonic clock, so they do not drift; a tick that overruns
skips the missed slots instead of bursting. Host metrics are read every agent.host_interval_s
(whole ticks, the first tick included): host CPU and memory move slowly next to GPU counters, and
at 1 Hz the psutil reads were the largest single cost of a tick (bench/agent.py).

Failure policy: an unreachable or unparsable exporter costs that tick's GPU rows (counted in
fleetscope_agent_errors_total, logged), never the agent; host rows still flow.

Must never: block a scrape on the network to ingest, or exit on a transient error.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from collector.attribution import build_resolver
from collector.batcher import Batcher
from collector.http import KeepAliveTransport, Transport
from collector.metrics import AgentMetrics
from collector.owner_reporter import OwnerReporter
from collector.shipper import Shipper
from collector.sources.base import GpuSource, HostSource
from collector.spool import Spool
from fleetscope.attribution.resolver import AttributionResolver
from fleetscope.errors import ConfigError, ContractError, SourceUnavailableError
from fleetscope.normalize import GpuReading
from fleetscope.settings import Settings

log = logging.getLogger(__name__)


class RowSource(Protocol):
    """Rows of one contract table that arrived since the last drain (e.g. SDK step metrics)."""

    table: str

    def drain(self) -> list[dict[str, object]]: ...


@dataclass
class Agent:
    gpu_source: GpuSource | None
    host_source: HostSource | None
    resolver: AttributionResolver
    batcher: Batcher
    shipper: Shipper
    metrics: AgentMetrics
    interval_s: float
    host_interval_s: float = 0.0  # host metrics every round(host_interval_s / interval_s) ticks
    wall_clock: Callable[[], float] = time.time
    monotonic: Callable[[], float] = time.monotonic
    last_ok_scrape: float | None = None
    closers: list[Callable[[], None]] = field(default_factory=list)
    row_sources: list[RowSource] = field(default_factory=list)
    workers: list[Callable[[threading.Event], None]] = field(default_factory=list)
    last_gpu_host: str | None = None  # the host name the GPU source reported last
    owners: OwnerReporter | None = None  # tells the server who owns each job (issue 13)
    clock_offset_ms: int = 0  # exporter time minus wall time at the last scrape (one clock)
    ticks: int = 0

    def tick(self) -> list[GpuReading]:
        """One round: returns the attributed GPU readings (also batched for shipping)."""
        ts_ms = int(self.wall_clock() * 1000)
        readings: list[GpuReading] = []
        if self.gpu_source is not None:
            started = time.perf_counter()
            try:
                readings = self.gpu_source.read(ts_ms)
                self.resolver.resolve(readings)
            except SourceUnavailableError as exc:
                self.metrics.errors.labels("gpu_source_unavailable").inc()
                log.warning("GPU source: %s", exc)
            except ContractError as exc:  # MetricsParseError names the line
                self.metrics.errors.labels("gpu_source_parse").inc()
                log.error("GPU source: %s", exc)
            else:
                self.last_ok_scrape = self.wall_clock()
                if readings:
                    self.last_gpu_host = str(readings[0].row.get("host") or "") or None
                    self.clock_offset_ms = _exporter_offset_ms(readings, ts_ms)
                    if self.owners is not None:
                        self.owners.observe(readings)
                self.metrics.last_scrape.set(self.last_ok_scrape)
            self.metrics.scrape_duration.labels("gpu").observe(time.perf_counter() - started)
        now = self.monotonic()
        sealed = []
        if readings:
            rows = [r.row for r in readings]
            self.metrics.samples_collected.labels("gpu_samples").inc(len(rows))
            sealed += self.batcher.add("gpu_samples", rows, now)
        host_every = max(1, round(self.host_interval_s / self.interval_s))
        self.ticks += 1
        if self.host_source is not None and (self.ticks - 1) % host_every == 0:
            started = time.perf_counter()
            try:
                # host rows follow the time base of the GPU rows scraped with them: an exporter
                # that stamps its samples (a replay, a late spool) moves both, never one
                host_rows = self.host_source.read(ts_ms + self.clock_offset_ms)
            except (SourceUnavailableError, ContractError, OSError) as exc:
                self.metrics.errors.labels("host_source").inc()
                log.warning("host source: %s", exc)
            else:
                self.metrics.samples_collected.labels("host_samples").inc(len(host_rows))
                sealed += self.batcher.add("host_samples", host_rows, now)
            self.metrics.scrape_duration.labels("host").observe(time.perf_counter() - started)
        for source in self.row_sources:
            try:
                extra_rows = source.drain()
            except (ContractError, ValueError, TypeError) as exc:
                self.metrics.errors.labels(f"{source.table}_source").inc()
                log.warning("%s source: %s", source.table, exc)
                continue
            if extra_rows:
                self.metrics.samples_collected.labels(source.table).inc(len(extra_rows))
                sealed += self.batcher.add(source.table, extra_rows, now)
        sealed += self.batcher.due(now)
        if sealed:
            self.shipper.wakeup.set()
        return readings

    def run(self, stop: threading.Event) -> None:
        """Tick on the grid until `stop` is set; then seal what is buffered into the spool."""
        sender = threading.Thread(
            target=self.shipper.run, args=(stop,), name="agent-shipper", daemon=True
        )
        sender.start()
        helpers = [
            threading.Thread(target=work, args=(stop,), name=f"agent-worker-{i}", daemon=True)
            for i, work in enumerate(self.workers)
        ]
        for helper in helpers:
            helper.start()
        start = self.monotonic()
        k = 0
        try:
            while not stop.is_set():
                self.tick()
                k = max(k + 1, int((self.monotonic() - start) / self.interval_s) + 1)
                stop.wait(max(0.0, start + k * self.interval_s - self.monotonic()))
        finally:
            self.batcher.flush()
            self.shipper.wakeup.set()
            sender.join(timeout=self.shipper.timeout_s + 1)
            for helper in helpers:
                helper.join(timeout=self.shipper.timeout_s + 1)
            for close in self.closers:
                close()


def _exporter_offset_ms(readings: list[GpuReading], wall_ms: int) -> int:
    """How far the exporter's sample timestamps are from our wall clock (0 when unstamped)."""
    stamped = [ts for r in readings if isinstance(ts := r.row.get("ts"), int)]
    return (max(stamped) - wall_ms) if stamped else 0


def agent_name(settings: Settings) -> str:
    return settings.agent.host or socket.gethostname()


def build_agent(
    settings: Settings,
    *,
    transport: Transport | None = None,
    nvml: Any = None,
    metrics: AgentMetrics | None = None,
) -> Agent:
    """Wire the agent from settings. `nvml` is the NVML library object (pynvml) when no
    dcgm-exporter URL is set; imported here only if needed."""
    from collector.sources.dcgm import DcgmSource
    from collector.sources.host import PsutilHostSource
    from collector.sources.node_exporter import NodeExporterSource

    closers: list[Callable[[], None]] = []
    if transport is None:
        transport = KeepAliveTransport(settings.agent.tls_ca_file)
        closers.append(transport.close)
    metrics = metrics or AgentMetrics()
    cluster = settings.agent.cluster
    host = settings.agent.host or None
    timeout_s = settings.agent.scrape_timeout_s
    cgroup_root = settings.path(settings.agent.cgroup_root) if settings.agent.cgroup_root else None
    pid_gpus = None
    gpu_source: GpuSource
    if settings.agent.dcgm_url:
        gpu_source = DcgmSource(
            settings.agent.dcgm_url,
            cluster=cluster,
            host=host,
            transport=transport,
            timeout_s=timeout_s,
        )
    else:
        from collector.sources.nvml import NvmlSource

        if nvml is None:
            import pynvml

            nvml = pynvml
        nvml_source = NvmlSource(nvml, cluster=cluster, host=host)
        pid_gpus = nvml_source.pid_gpus
        closers.append(nvml_source.close)
        gpu_source = nvml_source
    host_source: HostSource
    if settings.agent.node_exporter_url:
        host_source = NodeExporterSource(
            settings.agent.node_exporter_url,
            cluster=cluster,
            host=host,
            transport=transport,
            timeout_s=timeout_s,
            cgroup_root=cgroup_root,
        )
    else:
        host_source = PsutilHostSource(cluster=cluster, host=host, cgroup_root=cgroup_root)
    spool_dir = settings.path(settings.agent.spool_dir)
    try:
        spool = Spool(spool_dir, max_bytes=settings.agent.spool_max_bytes)
    except OSError as exc:  # a read-only root, or a folder not on a writable volume
        raise ConfigError(f"agent.spool_dir: cannot create {spool_dir}: {exc}") from exc
    from collector.backoff import Backoff

    shipper = Shipper(
        spool,
        ingest_url=settings.agent.ingest_url,
        token=settings.agent.token,
        agent_name=agent_name(settings),
        transport=transport,
        metrics=metrics,
        timeout_s=settings.agent.ingest_timeout_s,
        backoff=Backoff(cap_s=settings.agent.backoff_max_s),
    )
    owners = OwnerReporter.from_settings(settings, transport)
    return Agent(
        owners=owners,
        workers=[owners.run],
        gpu_source=gpu_source,
        host_source=host_source,
        resolver=build_resolver(settings, pid_gpus=pid_gpus),
        batcher=Batcher(
            spool,
            max_rows=settings.agent.batch_max_rows,
            max_age_s=settings.agent.ship_interval_s,
        ),
        shipper=shipper,
        metrics=metrics,
        interval_s=settings.agent.interval_s,
        host_interval_s=settings.agent.host_interval_s,
        closers=closers,
    )
