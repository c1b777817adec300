"""The two source protocols the agent loop drives."""

from __future__ import annotations

from typing import Protocol

from fleetscope.normalize import GpuReading


class GpuSource(Protocol):
    def read(self, ts_ms: int) -> list[GpuReading]:
        """One reading per GPU (or MIG instance) at `ts_ms`; SourceUnavailableError if down."""


class HostSource(Protocol):
    def read(self, ts_ms: int) -> list[dict[str, object]]:
        """host_samples rows at `ts_ms`: the whole host (job_id None), then one per job cgroup."""
