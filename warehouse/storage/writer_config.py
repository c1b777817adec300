"""How a writer groups, logs and flushes batches: one settings object for both modes (issue 27).

Why its own module: the embedded writer (warehouse.storage.writer) and a fleet gateway's
(warehouse.fleet.writer) took the same six settings as six constructor arguments each, and the
two server start-ups repeated them; both now take `WriterConfig.from_settings(settings)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from warehouse.ingest.shape_limits import UNLIMITED, ShapeLimits

if TYPE_CHECKING:
    from fleetscope.settings import Settings

__all__ = ["WriterConfig"]


@dataclass(frozen=True)
class WriterConfig:
    """How a writer groups, logs and flushes batches: the same settings in both modes."""

    flush_rows: int = 100_000
    flush_interval_s: float = 1.0
    flush_idle_s: float = 0.05
    queue_max_rows: int = 1_000_000
    shape_limits: ShapeLimits = UNLIMITED
    log_flush_interval_s: float = 1.0

    @classmethod
    def from_settings(cls, settings: Settings) -> WriterConfig:
        w = settings.warehouse
        return cls(
            flush_rows=w.flush_rows,
            flush_interval_s=w.flush_interval_s,
            flush_idle_s=w.flush_idle_s,
            queue_max_rows=w.queue_max_rows,
            shape_limits=ShapeLimits.from_settings(settings),
            log_flush_interval_s=w.log_flush_interval_s,
        )
