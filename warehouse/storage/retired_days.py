"""Which days' raw samples retention retired, from the manifest's own record: what a re-analysis
(`fleetscope backfill`, analyzers.run.backfill) must know before it replaces a day's findings.

A day retention retired keeps its GPU samples only as roll-ups (hours, not samples) and its host
and step samples not at all, so re-analysing it reads what is left (nothing, or rows that
arrived since) and would replace the day's findings with theirs. Two records say a day is gone,
both written by retention itself (warehouse.storage.retention, warehouse.read.rollups), never inferred from
the clock or from `warehouse.raw_retention_days` (retention may not have run yet, or ran with
another setting):

- `raw_retired/<day>`, set in the swap that retired the day's raw gpu_samples (or, for a day
  retired before that mark existed, roll-ups holding more rows than the day has raw);
- a day before the newest such day: retention's cut-off passed it, and every table's raw rows of
  days before the cut-off went in that swap (gpu_samples only wait for their roll-ups).

Fleet mode keeps no manifest: warehouse.fleet.retired_partitions answers the same question from the
Iceberg tables. This module only reads the manifest.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

from warehouse.read.rollups import FAMILIES, RETIRED_MARK, SOURCE_TABLE, raw_retired, retired_key
from warehouse.storage.segments import Manifest


@dataclass(frozen=True)
class RetiredDay:
    """A UTC day whose raw samples retention retired, and why that is known, in one line."""

    day: date
    why: str


def retired_days(manifest: Manifest, first: date, last: date) -> dict[date, RetiredDay]:
    """The days from `first` to `last` (inclusive) whose raw samples retention retired."""
    raw = manifest.by_date(SOURCE_TABLE)
    named = {RETIRED_MARK} | {family.mark for family in FAMILIES}
    marked = {
        day for name, _, day in (key.partition("/") for key in manifest.marks) if name in named
    }
    retired = {date.fromisoformat(d) for d in marked if raw_retired(manifest, d, raw.get(d, []))}
    newest = max(retired, default=None)
    out: dict[date, RetiredDay] = {}
    day = first
    while day <= last:
        if day in retired:
            out[day] = RetiredDay(day, _why_marked(manifest, day))
        elif newest is not None and day < newest:
            out[day] = RetiredDay(
                day,
                f"before {newest.isoformat()}, the newest day retention retired: its cut-off "
                "took the host and step samples with it",
            )
        day += timedelta(days=1)
    return out


def _why_marked(manifest: Manifest, day: date) -> str:
    mark = manifest.marks.get(retired_key(day.isoformat()), "legacy")
    _, _, rows = mark.rpartition(":")
    count = f"{int(rows)} " if rows.isdigit() else ""
    return f"retention retired its {count}raw GPU samples; roll-ups keep them by minute and hour"
