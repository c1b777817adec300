"""A gateway's staging and committer figures on its /metrics, read at scrape time.

`fleetscope_iceberg_commit_conflicts_total` counts the Iceberg commits that failed on a concurrent
update and were retried (pyiceberg's CommitFailedException): with one committer per table it
should stay 0 (the 3-gateway test asserts it); a rise means something else commits to the
tables (the upkeep's rewrites). This module must never export telemetry samples.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from warehouse.fleet.committer import TableCommitter
from warehouse.fleet.writer import FleetWriter


class StagingCollector(Collector):
    def __init__(self, writer: FleetWriter, committer: TableCommitter) -> None:
        self._writer = writer
        self._committer = committer

    def collect(self) -> Iterator[Metric]:
        stats = self._committer.stats
        yield CounterMetricFamily(
            "fleetscope_iceberg_commit_conflicts",
            "Iceberg commits of this gateway's committer retried after a concurrent update.",
            stats.conflicts,
        )
        yield CounterMetricFamily(
            "fleetscope_iceberg_commits",
            "Iceberg appends of staged files made by this gateway's committer.",
            stats.commits,
        )
        yield CounterMetricFamily(
            "fleetscope_iceberg_files_committed",
            "Staged data files this gateway's committer appended (any gateway's).",
            stats.files_committed,
        )
        yield CounterMetricFamily(
            "fleetscope_iceberg_staged_files_merged",
            "Staged data files this gateway's committer merged into one per partition.",
            stats.files_merged,
        )
        yield CounterMetricFamily(
            "fleetscope_iceberg_tier_merges",
            "Rewrites by this gateway's committer of ten committed files of one size tier as one.",
            stats.tier_merges,
        )
        yield CounterMetricFamily(
            "fleetscope_iceberg_commit_pass_seconds",
            "Wall seconds of this gateway's committer passes (a table's merge, append, marking).",
            stats.pass_s,
        )
        yield CounterMetricFamily(
            "fleetscope_iceberg_merge_seconds",
            "Wall seconds of those passes spent merging staged and committed files.",
            stats.merge_s,
        )
        yield CounterMetricFamily(
            "fleetscope_gateway_files_staged",
            "Data files this gateway wrote and staged for the committer.",
            self._writer.files_staged,
        )
        yield GaugeMetricFamily(
            "fleetscope_iceberg_tables_committing",
            "Tables whose commit lock this gateway holds (it is their committer).",
            len(self._committer.lease.held),
        )
