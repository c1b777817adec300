"""The remote_write receiver's counters on the server's /metrics (embedded server and gateway).

Read at scrape time from `RemoteWrite.snapshot` and its counters; never changes the receiver.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from warehouse.prometheus.remote_write import RemoteWrite

__all__ = ["RemoteWriteCollector"]


class RemoteWriteCollector(Collector):
    """The receiver's counters on the server's /metrics, read at scrape time."""

    def __init__(self, receiver: RemoteWrite) -> None:
        self._receiver = receiver

    def collect(self) -> Iterator[Metric]:
        receiver = self._receiver
        stats, waiting = receiver.snapshot()
        yield CounterMetricFamily(
            "fleetscope_remote_write_requests", "remote_write requests decoded.", receiver.requests
        )
        series = CounterMetricFamily(
            "fleetscope_remote_write_samples",
            "remote_write samples by what became of them.",
            labels=["outcome"],
        )
        for outcome, count in (
            ("kept", stats.samples),
            ("late", stats.late_samples),
            ("stale_marker", stats.stale_markers),
        ):
            series.add_metric([outcome], count)
        yield series
        yield CounterMetricFamily(
            "fleetscope_remote_write_already_stored_batches",
            "Assembled batches the ledger already held when first submitted: another receiver "
            "stored the same scrapes (a failover re-send, or shards of one Prometheus split "
            "across gateways).",
            receiver.already_stored,
        )
        yield CounterMetricFamily(
            "fleetscope_remote_write_ignored_series",
            "Series that are not per-GPU DCGM fields (up, scrape_*, other exporters).",
            stats.series_ignored,
        )
        scrapes = CounterMetricFamily(
            "fleetscope_remote_write_scrapes",
            "Scrapes assembled and stored, complete or at the hold timeout.",
            labels=["state"],
        )
        scrapes.add_metric(["complete"], stats.scrapes_complete)
        scrapes.add_metric(["incomplete"], stats.scrapes_incomplete)
        yield scrapes
        yield GaugeMetricFamily(
            "fleetscope_remote_write_waiting_scrapes",
            "Scrapes waiting for their remaining series.",
            waiting,
        )
