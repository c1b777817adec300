"""The ingest server's own Prometheus metrics, on a registry of its own (never the global one).

Request counters and latencies are updated by the handlers; the writer's figures (queue depth,
flushes, committed rows) are read at scrape time by a collector, so the writer thread does no
metrics work. This module must never export telemetry samples themselves.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fleetscope.contract import VALUE_COLUMNS
from fleetscope.process_metrics import register_process_metrics
from warehouse.ingest.sink import BatchSink
from warehouse.storage.writer import WriterStats

if TYPE_CHECKING:
    from sqlalchemy import Engine


class WriterCollector(Collector):
    def __init__(self, writer: BatchSink) -> None:
        self._writer = writer

    def collect(self) -> Iterator[Metric]:
        stats = self._writer.stats
        yield GaugeMetricFamily(
            "fleetscope_writer_queued_rows",
            "Rows waiting for the writer.",
            self._writer.queued_rows,
        )
        yield CounterMetricFamily(
            "fleetscope_writer_flushes", "Commits made by the writer.", stats.flushes
        )
        yield CounterMetricFamily(
            "fleetscope_writer_failed_flushes",
            "Flushes (groups or single batches) that failed; a failed group is retried batch by "
            "batch.",
            stats.failed_flushes,
        )
        yield CounterMetricFamily(
            "fleetscope_writer_refused_batches",
            "Batches the writer could never store (poison isolation): answered 422.",
            stats.batches_refused,
        )
        yield CounterMetricFamily(
            "fleetscope_writer_duplicate_batches",
            "Batches dropped because their id was already committed.",
            stats.duplicates,
        )
        rows = CounterMetricFamily(
            "fleetscope_writer_rows", "Rows committed, per table.", labels=["table"]
        )
        values = CounterMetricFamily(
            "fleetscope_writer_values",
            "Measurement values committed (VALUE_COLUMNS x rows), per table.",
            labels=["table"],
        )
        for table, count in sorted(stats.rows_committed.items()):
            rows.add_metric([table], count)
            values.add_metric([table], count * len(VALUE_COLUMNS[table]))
        yield rows
        yield values
        yield GaugeMetricFamily(
            "fleetscope_writer_last_flush_seconds",
            "Duration of the last flush (segments, insert, commit).",
            stats.last_flush_s,
        )
        yield GaugeMetricFamily(
            "fleetscope_writer_last_flush_rows", "Rows in the last flush.", stats.last_flush_rows
        )
        yield from ingest_log_metrics(stats, self._writer.log_fsyncs, time.monotonic())


def ingest_log_metrics(stats: WriterStats, fsyncs: int, now: float) -> Iterator[Metric]:
    """The ingest log's figures (warehouse.storage.ingest_log; zero where a writer has none):
    how often it made groups durable, what waits in it for the store, and for how long."""
    yield CounterMetricFamily(
        "fleetscope_ingest_log_groups_logged_total",
        "Groups of batches appended to the ingest log and acknowledged with one fsync.",
        stats.groups_logged,
    )
    yield CounterMetricFamily(
        "fleetscope_ingest_log_fsyncs_total",
        "fsync calls the ingest log made (group syncs, new segment folders, quarantine copies).",
        fsyncs,
    )
    yield CounterMetricFamily(
        "fleetscope_ingest_log_batches_quarantined_total",
        "Logged (acknowledged) batches the store refused on their data, kept in the log's "
        "quarantine folder.",
        stats.batches_quarantined,
    )
    yield GaugeMetricFamily(
        "fleetscope_ingest_log_pending_bytes",
        "Arrow bytes of acknowledged batches in the ingest log not yet flushed to the store.",
        stats.log_pending_bytes,
    )
    since = stats.log_pending_since
    yield GaugeMetricFamily(
        "fleetscope_ingest_log_flush_lag_seconds",
        "How long the oldest acknowledged batch not yet flushed to the store has waited (0: none).",
        max(0.0, now - since) if since is not None else 0.0,
    )


class ArrivalCollector(Collector):
    """Buckets whose late data was not re-analysed (older than analyzers.reopen_max_age_s)."""

    def __init__(self, catalog: Engine) -> None:
        self._catalog = catalog

    def collect(self) -> Iterator[Metric]:
        from warehouse.catalog.arrivals import skipped

        with self._catalog.connect() as conn:
            count = len({bucket for _p, bucket, _a in skipped(conn)})
        yield GaugeMetricFamily(
            "fleetscope_analyzer_buckets_skipped",
            "Buckets that received late data older than analyzers.reopen_max_age_s and were not "
            "re-analysed (list them with `fleetscope analyzers --skipped`).",
            count,
        )


class ServerMetrics:
    def __init__(
        self, writer: BatchSink, catalog: Engine | None = None, component: str = "server"
    ) -> None:
        self.registry = CollectorRegistry()
        register_process_metrics(self.registry, component)  # process_* and fleetscope_build_info
        self.requests = Counter(
            "fleetscope_ingest_requests",
            "HTTP requests answered, by route and status.",
            ["route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "fleetscope_ingest_request_seconds",
            "Time from request line to response, by route (batches include the commit wait).",
            ["route"],
            buckets=(0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0),
            registry=self.registry,
        )
        self.registry.register(WriterCollector(writer))
        if catalog is not None:
            self.registry.register(ArrivalCollector(catalog))
