"""Which buckets `fleetscope backfill` re-runs: every bucket of the range whose raw samples are
still complete, and none whose raw samples retention retired, unless asked to.

A re-run replaces the bucket's findings with what it reads. A bucket retention retired (any UTC
day of it, in any cluster) has only roll-ups left (hours, not samples) and the rows that arrived
since, so a re-run would replace a month of findings with none, or with the late rows' alone. Such
a bucket is skipped, its stored findings untouched, and reported with the day and why
(`RETIRED_BY_MODE`: the manifest's record in embedded mode, warehouse.storage.retired_days; the Iceberg
tables in fleet mode, warehouse.fleet.retired_partitions), never by the clock. `rerun_retired` runs it
anyway, for someone who wants the findings of what is left.

This module decides only; the CLI runs or enqueues the windows (analyzers.cli).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING

from fleetscope.errors import ConfigError

if TYPE_CHECKING:
    from analyzers.run.window import Window
    from fleetscope.settings import Settings
    from warehouse.storage.retired_days import RetiredDay


@dataclass(frozen=True)
class RetiredBucket:
    """A bucket of the range with retired raw samples: its [start, end) and the days that say so."""

    start: datetime
    end: datetime
    days: tuple[RetiredDay, ...]

    def why(self) -> str:
        return "; ".join(f"{d.day.isoformat()}: {d.why}" for d in self.days)


@dataclass(frozen=True)
class BackfillPlan:
    """The windows to run (or enqueue), and the retired buckets, skipped or re-run anyway."""

    windows: list[Window]
    retired: list[RetiredBucket]
    rerun_retired: bool


def days_of(start: datetime, end: datetime) -> list[date]:
    """The UTC days [start, end) touches."""
    first, last = start.date(), (end - timedelta(microseconds=1)).date()
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def plan(
    windows: list[Window], retired: Mapping[date, RetiredDay], *, rerun_retired: bool
) -> BackfillPlan:
    """Keep the windows whose days hold no retired day (all of them with `rerun_retired`); list
    each retired bucket once, whatever the number of its partitions."""
    kept: list[Window] = []
    buckets: dict[tuple[datetime, datetime], RetiredBucket] = {}
    for w in windows:
        days = tuple(retired[d] for d in days_of(w.start, w.end) if d in retired)
        if days:
            buckets.setdefault((w.start, w.end), RetiredBucket(w.start, w.end, days))
        if rerun_retired or not days:
            kept.append(w)
    return BackfillPlan(kept, list(buckets.values()), rerun_retired)


def _embedded(settings: Settings, first: date, last: date) -> Mapping[date, RetiredDay]:
    from warehouse.storage.paths import WarehousePaths
    from warehouse.storage.retired_days import retired_days
    from warehouse.storage.segments import read_manifest

    manifest = read_manifest(WarehousePaths.from_settings(settings).segments_dir)
    return retired_days(manifest, first, last)


def _fleet(settings: Settings, first: date, last: date) -> Mapping[date, RetiredDay]:
    from warehouse.fleet.retired_partitions import retired_days
    from warehouse.fleet.tables import FleetConfig, FleetTables

    return retired_days(FleetTables(FleetConfig.from_settings(settings)), first, last)


# Where a mode's retention records what it retired (`server.mode`).
RETIRED_BY_MODE: dict[str, Callable[[Settings, date, date], Mapping[date, RetiredDay]]] = {
    "embedded": _embedded,
    "fleet": _fleet,
}


def plan_backfill(
    settings: Settings, windows: list[Window], *, rerun_retired: bool = False
) -> BackfillPlan:
    """The plan for `windows` against what this deployment's retention retired."""
    if not windows:
        return BackfillPlan([], [], rerun_retired)
    mode = settings.server.mode
    if mode not in RETIRED_BY_MODE:
        raise ConfigError(f"server.mode must be one of {', '.join(RETIRED_BY_MODE)}, got {mode!r}")
    first = min(w.start for w in windows).date()
    last = (max(w.end for w in windows) - timedelta(microseconds=1)).date()
    return plan(windows, RETIRED_BY_MODE[mode](settings, first, last), rerun_retired=rerun_retired)
