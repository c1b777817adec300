"""Explicit override file: a TOML table mapping a GPU to a job; wins over every other source.

Format (agent.attribution_override):

    [gpus]
    "GPU-5f1c2a7e-8b3d-4c11-9e2a-000000000003" = "918273"   # by UUID
    "4" = "918274"                                          # by index
    "0:2" = "mig-job-7"                                     # MIG instance GPU_I_ID 2 of GPU 0

For what no scheduler tells us (a reserved debug node, a vendor's burn-in). Re-read when the file
changes. Must never: fail the scrape when the file is missing (no overrides) or bad (ConfigError at
start-up, then the last good table).
"""

from __future__ import annotations

import logging
import tomllib
from pathlib import Path

from fleetscope.attribution.base import gpu_keys
from fleetscope.errors import ConfigError
from fleetscope.normalize import GpuReading

log = logging.getLogger(__name__)


def load_override_table(path: Path) -> dict[str, str]:
    """Read the `[gpus]` table; ConfigError names the file and what is wrong."""
    try:
        with path.open("rb") as handle:
            table = tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"attribution override {path}: {exc}") from exc
    gpus = table.get("gpus", {})
    if not isinstance(gpus, dict) or not all(isinstance(v, str) for v in gpus.values()):
        raise ConfigError(f"attribution override {path}: [gpus] must map GPU keys to job ids")
    return {str(k): v for k, v in gpus.items() if v}


class OverrideFile:
    name = "override"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._mtime_ns: int | None = None
        self._table: dict[str, str] = {}
        if path.exists():
            self._table = load_override_table(path)
            self._mtime_ns = path.stat().st_mtime_ns

    def refresh(self) -> None:
        try:
            mtime = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            self._table, self._mtime_ns = {}, None
            return
        if mtime != self._mtime_ns:
            try:
                self._table = load_override_table(self.path)
            except (ConfigError, OSError) as exc:
                log.warning("keeping the last good override table: %s", exc)
            self._mtime_ns = mtime

    def job_for(self, reading: GpuReading) -> str | None:
        if not self._table:  # nothing to match: skip building the reading's keys (per GPU per tick)
            return None
        for key in gpu_keys(reading):
            job = self._table.get(key)
            if job:
                return job
        return None
