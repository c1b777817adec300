"""The attribution resolver: asks each source in a fixed precedence and records who answered.

Shared by the agent (collector.attribution.resolver.build_resolver adds the host-local sources)
and the warehouse's Prometheus paths (label sources only), so it lives in the core. The precedence
and why it is what it is: collector/attribution/resolver.py.

Must never: change a row's measurements.
"""

from __future__ import annotations

from collections.abc import Sequence

from fleetscope.attribution.base import AttributionSource
from fleetscope.normalize import GpuReading


class AttributionResolver:
    def __init__(self, sources: Sequence[AttributionSource]) -> None:
        self.sources = tuple(sources)

    def resolve(self, readings: Sequence[GpuReading]) -> None:
        """Fill `job_id` and `attribution` of each reading's row, in place.

        A source is refreshed only when some reading gets that far down the precedence list, so
        the costly /proc scan is skipped on hosts where labels or mapping files name every job.
        """
        refreshed: set[int] = set()
        for reading in readings:
            for i, source in enumerate(self.sources):
                if i not in refreshed:
                    source.refresh()
                    refreshed.add(i)
                job = source.job_for(reading)
                if job:
                    reading.row["job_id"] = job
                    reading.row["attribution"] = source.name
                    break
