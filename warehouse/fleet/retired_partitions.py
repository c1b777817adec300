"""Fleet mode: which days' raw GPU samples retention dropped, per (day, cluster) partition, read
from the Iceberg tables: what `fleetscope backfill` must know before it replaces a day's findings
(analyzers.run.backfill; the embedded answer is warehouse.storage.retired_days's).

Only retention writes the hourly roll-ups (`drop_raw` rolls a partition up, then deletes exactly
the files it rolled up and forgets their record, warehouse.fleet.upkeep). So a partition's raw
samples are gone when its roll-up rows count more samples than the live raw files they were made
from still hold: those are the recorded files that are still live (a retention that died between
its roll-up and its delete left them all), none once retention finished. Late rows that arrived
since do not count, their samples are not in the roll-ups yet. Every contract table of a day
goes in the same upkeep, so a dropped gpu_samples partition stands for the day's cluster.

This module only reads: plans (manifests and file statistics) and the roll-up rows of the range.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING

import duckdb

from warehouse.fleet.rollup import ROLLUP_1H, rolled_files
from warehouse.fleet.tables import FleetTables
from warehouse.storage.retired_days import RetiredDay

if TYPE_CHECKING:
    from pyiceberg.table import Table

Key = tuple[date, str | None]  # (day, cluster); None: the rows without a cluster label


def retired_days(tables: FleetTables, first: date, last: date) -> dict[date, RetiredDay]:
    """The days from `first` to `last` (inclusive) with a cluster whose raw GPU samples retention
    dropped, each naming those clusters and how many samples only the roll-ups keep."""
    rollup = tables.existing(ROLLUP_1H)
    raw = tables.existing("gpu_samples")
    if rollup is None or raw is None:  # no retention ever ran
        return {}
    start = datetime(first.year, first.month, first.day, tzinfo=UTC)
    end = start + timedelta(days=(last - first).days + 1)
    row_filter = f"ts >= '{start.isoformat()}' AND ts < '{end.isoformat()}'"
    rollup.refresh()
    raw.refresh()
    live = {
        t.file.file_path: t.file.record_count for t in raw.scan(row_filter=row_filter).plan_files()
    }
    gone: dict[date, list[str]] = defaultdict(list)
    rolled = _rolled_samples(rollup, row_filter)
    for day, cluster in sorted(rolled, key=lambda k: (k[0], k[1] is not None, k[1] or "")):
        samples = rolled[(day, cluster)]
        kept = sum(live.get(path, 0) for path in rolled_files(rollup, day, cluster))
        if samples > kept:
            gone[day].append(f"{'(no cluster)' if cluster is None else cluster}: {samples - kept}")
    return {
        day: RetiredDay(
            day,
            "retention dropped raw GPU samples that only the hourly roll-ups keep ("
            + ", ".join(clusters)
            + ")",
        )
        for day, clusters in sorted(gone.items())
    }


def _rolled_samples(rollup: Table, row_filter: str) -> dict[Key, int]:
    """Samples the roll-up rows of the range hold, per (day, cluster)."""
    rows = rollup.scan(row_filter=row_filter, selected_fields=("ts", "cluster", "samples"))
    conn = duckdb.connect()
    try:
        conn.execute("SET TimeZone = 'UTC'")
        conn.register("rolled", rows.to_arrow())
        found = conn.execute(
            "SELECT CAST(ts AS DATE), cluster, sum(samples) FROM rolled GROUP BY ALL"
        ).fetchall()
    finally:
        conn.close()
    return {(day, cluster): int(samples) for day, cluster, samples in found}
