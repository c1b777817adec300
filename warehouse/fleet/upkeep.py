"""Fleet-mode upkeep, one (day, cluster) partition at a time: compaction, roll-ups, retention,
and snapshot expiry per table. Each is a plain function a Celery task calls (analyzers.run.fleet).

Safe while gateways commit: every rewrite is one Iceberg commit whose base is the snapshot it
read (pyiceberg asserts the table's current snapshot on commit). If a gateway appended to the table
meanwhile, the commit fails, and the job re-reads and retries; the gateway's own append retries
the same way when the job won. A reader planning on an older snapshot keeps its files until
`expire_snapshots` drops snapshots older than its grace.

    compact(partition)            many small files -> one file sorted by ts (same rows)
    roll_up(partition)            gpu_samples -> gpu_samples_1h for that day and cluster
    drop_raw(partition)           rolls up first, then deletes the raw rows (whole files)
    expire_snapshots(table, age)  forgets snapshots older than age (their files stay until the
                                  orphan sweep, warehouse.fleet.orphans, deletes them)
    prune_ledger(catalog, ...)    forgets batch ids past raw retention plus fleet.ledger_margin_days
"""

from __future__ import annotations

import contextlib
import logging
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

import duckdb
import pyarrow as pa
from sqlalchemy import Engine

from fleetscope.errors import ConfigError
from warehouse.catalog import ledger
from warehouse.fleet.reader import scan
from warehouse.fleet.tables import FLUSH_PROPERTY, FleetTables, to_table_schema
from warehouse.rollups import ROLLUP_COLUMNS

if TYPE_CHECKING:
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

T = TypeVar("T")
ROLLUP_1H = "gpu_samples_1h"
EPOCH_DAY = date(1970, 1, 1)


@dataclass(frozen=True, order=True)
class Partition:
    table: str
    day: date
    cluster: str

    @property
    def start(self) -> datetime:
        return datetime(self.day.year, self.day.month, self.day.day, tzinfo=UTC)

    @property
    def end(self) -> datetime:
        return self.start + timedelta(days=1)

    def row_filter(self, column: str = "ts") -> str:
        quoted = self.cluster.replace("'", "''")
        return (
            f"{column} >= '{self.start.isoformat()}' AND {column} < '{self.end.isoformat()}' "
            f"AND cluster == '{quoted}'"
        )


def partitions(tables: FleetTables, name: str) -> list[Partition]:
    """Every (day, cluster) partition of `name` holding data files now."""
    table = tables.table(name)
    table.refresh()
    seen = set()
    for task in table.scan().plan_files():
        record = task.file.partition
        seen.add(Partition(name, EPOCH_DAY + timedelta(days=int(record[0])), str(record[1])))
    return sorted(seen)


def file_count(tables: FleetTables, part: Partition) -> int:
    table = tables.table(part.table)
    table.refresh()
    return sum(1 for _ in table.scan(row_filter=part.row_filter()).plan_files())


@contextlib.contextmanager
def _quiet_empty_delete() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Delete operation did not match any records")
        yield


def _retrying(table: Table, job: Callable[[], T], attempts: int = 10) -> T:
    """Run a read-then-commit job again after a commit conflict (a gateway committed first)."""
    from pyiceberg.exceptions import CommitFailedException

    for attempt in range(attempts):
        try:
            return job()
        except CommitFailedException:
            table.refresh()
            time.sleep(min(1.0, 0.05 * 2**attempt))
    raise RuntimeError(f"{table.name()}: still conflicting after {attempts} attempts")


def compact(tables: FleetTables, part: Partition, min_files: int = 2) -> int:
    """Rewrite the partition's files as one, sorted by time; returns the files replaced (0: none)."""
    table = tables.table(part.table)

    def job() -> int:
        table.refresh()
        files = file_count(tables, part)
        if files < min_files:
            return 0
        rows, _ = scan(tables, part.table, part.start, part.end, [part.cluster])
        table.overwrite(to_table_schema(rows, table), overwrite_filter=part.row_filter())
        return files

    replaced = _retrying(table, job)
    if replaced:
        log.info("compacted %s %s %s: %d files -> 1", part.table, part.day, part.cluster, replaced)
    return replaced


def rollup_rows(raw: pa.Table) -> pa.Table:
    """Hourly roll-up of gpu_samples rows, the embedded gpu_samples_1h columns (warehouse.rollups)."""
    stats = ", ".join(f"avg({c}) AS {c}_mean, max({c}) AS {c}_max" for c in ROLLUP_COLUMNS)
    conn = duckdb.connect()
    try:
        conn.execute("SET TimeZone = 'UTC'")
        conn.register("raw", raw)
        return conn.sql(
            "SELECT date_trunc('hour', ts) AS ts, cluster, host, gpu_index, job_id, "
            f"count(*) AS samples, {stats} FROM raw GROUP BY ALL "
            "ORDER BY cluster, ts, host, gpu_index"
        ).to_arrow_table()
    finally:
        conn.close()


ROLLUP_KEY = ("ts", "cluster", "host", "gpu_index", "job_id")


def roll_up(tables: FleetTables, part: Partition) -> int:
    """(Re)compute gpu_samples_1h for one gpu_samples partition; returns the roll-up rows.

    The partition may have been rolled up before: its raw rows were dropped at retention and
    late rows arrived since (a spool replayed weeks later, an import), or a retention run died
    between the roll-up and the delete. So the roll-up rows already stored are kept, and only
    hours (per GPU and job) they do not hold are added: a re-run adds nothing twice, and late
    rows never replace the day they join. Late samples of an hour already rolled up are not
    merged into it (the stored row does not keep what a merge would need)."""
    raw, _ = scan(tables, "gpu_samples", part.start, part.end, [part.cluster])
    rolled = rollup_rows(raw)
    target = tables.rollup_table(ROLLUP_1H, rolled.schema)

    def job() -> int:
        target.refresh()
        schema = target.schema().as_arrow()
        stored = target.scan(row_filter=part.row_filter()).to_arrow().cast(schema)
        rows = _with_new_hours(stored, rolled.cast(schema))
        with _quiet_empty_delete():  # the first roll-up of a partition replaces nothing
            target.overwrite(rows, overwrite_filter=part.row_filter())
        return int(rows.num_rows)

    return _retrying(target, job)


def _with_new_hours(stored: pa.Table, rolled: pa.Table) -> pa.Table:
    """`stored` plus the rows of `rolled` whose key (hour, cluster, host, GPU, job) it lacks."""
    if stored.num_rows == 0:
        return rolled
    conn = duckdb.connect()
    try:
        conn.register("stored", stored)
        conn.register("rolled", rolled)
        same = " AND ".join(f"r.{k} IS NOT DISTINCT FROM s.{k}" for k in ROLLUP_KEY)
        fresh = conn.sql(f"SELECT r.* FROM rolled r ANTI JOIN stored s ON {same}").to_arrow_table()
    finally:
        conn.close()
    merged = pa.concat_tables([stored, fresh.cast(stored.schema)])
    order = [(k, "ascending") for k in ("cluster", "ts", "host", "gpu_index")]
    return merged.sort_by(order)  # as rollup_rows writes them: the table is sorted by ts


def drop_raw(tables: FleetTables, part: Partition) -> int:
    """Raw retention for one partition: roll up first (roll-ups are kept), then delete the raw
    rows; the filter matches whole partition files, so Iceberg drops them without rewriting."""
    if part.table == "gpu_samples":
        roll_up(tables, part)
    table = tables.table(part.table)
    files = file_count(tables, part)

    def job() -> int:
        table.refresh()
        table.delete(delete_filter=part.row_filter())
        return files

    return _retrying(table, job)


def retention(tables: FleetTables, name: str, days: int, now: datetime) -> list[Partition]:
    """Drop every partition of `name` whose day ended more than `days` days before `now`."""
    cutoff = (now - timedelta(days=days)).date()
    dropped = [p for p in partitions(tables, name) if p.day < cutoff]
    for part in dropped:
        drop_raw(tables, part)
    return dropped


def expire_snapshots(
    tables: FleetTables, name: str, older_than: timedelta, now: datetime, catalog: Engine
) -> int:
    """Expire snapshots older than `older_than` (the current one is always kept), after settling
    the ledger claims of the flushes they carry (ledger.settle: the summary is the only proof a
    dead gateway's commit landed, and expiry forgets it)."""
    table = tables.table(name)
    table.refresh()
    cutoff_ms = int((now - older_than).timestamp() * 1000)
    current = table.current_snapshot()
    old = [
        s
        for s in table.snapshots()
        if s.timestamp_ms < cutoff_ms and (current is None or s.snapshot_id != current.snapshot_id)
    ]
    if old:
        carried = (s.summary.get(FLUSH_PROPERTY) for s in old if s.summary is not None)
        flushes = [str(flush) for flush in carried if flush]  # compactions and deletes carry none
        with catalog.begin() as conn:
            ledger.settle(conn, flushes, now)
        table.maintenance.expire_snapshots().by_ids([s.snapshot_id for s in old]).commit()
    return len(old)


def ledger_cutoff(now: datetime, raw_retention_days: int, margin_days: int) -> datetime:
    """Where the batch ledger may be forgotten: midnight UTC, `raw_retention_days` plus
    `margin_days` days before `now`'s day (retention drops raw days before `raw_retention_days`)."""
    if margin_days < 0 or raw_retention_days < 0:
        raise ConfigError(
            f"fleet.ledger_margin_days ({margin_days}) and warehouse.raw_retention_days "
            f"({raw_retention_days}) must not be negative"
        )
    day = now.astimezone(UTC).date() - timedelta(days=raw_retention_days + margin_days)
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def prune_ledger(catalog: Engine, raw_retention_days: int, margin_days: int, now: datetime) -> int:
    """Forget the batch ids claimed before `ledger_cutoff`; returns how many (ledger.prune)."""
    cutoff = ledger_cutoff(now, raw_retention_days, margin_days)
    with catalog.begin() as conn:
        pruned = ledger.prune(conn, cutoff)
    log.info("ledger: forgot %d batch ids claimed before %s", pruned, cutoff.isoformat())
    return pruned
