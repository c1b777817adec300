"""The writer's commit hook that records which identity buckets received rows (arrival marks).

After each commit it groups the committed rows of every table by (bucket of `ts`, cluster) and
upserts one arrival mark per group, stamped with the commit's wall-clock time. The scheduler
(analyzers.run.schedule) re-analyses every bucket whose mark is newer than what it analysed, whatever
the bucket's age: that is how a replayed spool, an import or old remote_write samples get their
findings without a backfill by hand. Runs on the writer thread after the rows are durable; a
failure is logged by the writer, never turned into a refused batch. This module must never write
telemetry nor run analyzers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import Engine

from warehouse.catalog.arrivals import Arrival, record_arrivals
from warehouse.storage.writer import Commit

NO_CLUSTER = ""  # rows without a cluster label


class ArrivalMarks:
    def __init__(
        self,
        engine: Engine,
        bucket_s: int,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if bucket_s <= 0:
            raise ValueError(f"bucket_s must be positive, got {bucket_s}")
        self._engine = engine
        self._bucket_ms = int(bucket_s) * 1000
        self._clock = clock

    def __call__(self, commit: Commit) -> None:
        arrivals = arrivals_of(commit.tables, self._bucket_ms, self._clock())
        if arrivals:
            with self._engine.begin() as conn:
                record_arrivals(conn, arrivals)


def arrivals_of(tables: Mapping[str, pa.Table], bucket_ms: int, at: datetime) -> list[Arrival]:
    """One arrival per (bucket, cluster) present in the committed tables."""
    spans: dict[tuple[int, str], tuple[int, int]] = {}
    for data in tables.values():
        if data.num_rows == 0 or "ts" not in data.column_names:
            continue
        ts_ms = pc.cast(pc.cast(data.column("ts"), pa.timestamp("ms", tz="UTC")), pa.int64())
        bucket = pc.multiply(pc.divide(ts_ms, pa.scalar(bucket_ms, pa.int64())), bucket_ms)
        cluster = (
            pc.fill_null(data.column("cluster"), NO_CLUSTER)
            if "cluster" in data.column_names
            else pa.array([NO_CLUSTER] * data.num_rows)
        )
        grouped = (
            pa.table({"bucket": bucket, "cluster": cluster, "ts": ts_ms})
            .group_by(["bucket", "cluster"], use_threads=False)
            .aggregate([("ts", "min"), ("ts", "max")])
        )
        for row in grouped.to_pylist():
            key = (row["bucket"], row["cluster"])
            lo, hi = spans.get(key, (row["ts_min"], row["ts_max"]))
            spans[key] = (min(lo, row["ts_min"]), max(hi, row["ts_max"]))
    return [Arrival(_dt(b), c, at, _dt(lo), _dt(hi)) for (b, c), (lo, hi) in sorted(spans.items())]


def _dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)
