"""Fleet-mode upkeep, one (day, cluster) partition at a time: compaction, roll-ups, retention,
and snapshot expiry per table. Each is a plain function a Celery task calls (analyzers.run.fleet).

Safe while gateways commit: every rewrite is one Iceberg commit whose base is the snapshot it
read (pyiceberg asserts the table's current snapshot on commit). If a gateway appended to the table
meanwhile, the commit fails, and the job re-reads and retries; the gateway's own append retries
the same way when the job won. A reader planning on an older snapshot keeps its files until
`expire_snapshots` drops snapshots older than its grace.

    compact(partition)            many small files -> one file sorted by ts (same rows; the
                                  committed files only, warehouse.fleet.rewrite)
    roll_up(partition)            gpu_samples -> gpu_samples_1h for that day and cluster, late
                                  samples merged into hours already rolled up (fleet.rollup)
    drop_raw(partition)           rolls up first, then deletes the files rolled up (whole files)
    expire_snapshots(table, age)  forgets snapshots older than age (their files stay until the
                                  orphan sweep, warehouse.fleet.orphans, deletes them); the
                                  contract's tables and gpu_samples_1h alike
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

import pyarrow as pa
from sqlalchemy import Engine

from fleetscope.errors import ConfigError
from warehouse.catalog import ledger, staging
from warehouse.fleet.reader import cluster_filter
from warehouse.fleet.rewrite import LARGE_BYTES, packed, rewrite
from warehouse.fleet.rollup import (
    ROLLUP_1H,
    evolve,
    merge_rows,
    rolled_files,
    rolled_key,
    rolled_record,
    rollup_rows,
    rollup_schema,
)
from warehouse.fleet.tables import FLUSH_PROPERTY, FleetTables, to_contract

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import FileScanTask, Table

log = logging.getLogger(__name__)

T = TypeVar("T")
EPOCH_DAY = date(1970, 1, 1)


@dataclass(frozen=True)
class Partition:
    """One (day, cluster) partition of a table; `cluster` None holds the rows without a cluster
    (the contract's column is nullable: an agent with no `agent.cluster`, an import)."""

    table: str
    day: date
    cluster: str | None

    def sort_key(self) -> tuple[str, date, bool, str]:
        return (self.table, self.day, self.cluster is not None, self.cluster or "")

    @property
    def start(self) -> datetime:
        return datetime(self.day.year, self.day.month, self.day.day, tzinfo=UTC)

    @property
    def end(self) -> datetime:
        return self.start + timedelta(days=1)

    def row_filter(self, column: str = "ts") -> str:
        return (
            f"{column} >= '{self.start.isoformat()}' AND {column} < '{self.end.isoformat()}' "
            f"AND {cluster_filter([self.cluster])}"
        )


def partitions(tables: FleetTables, name: str) -> list[Partition]:
    """Every (day, cluster) partition of `name` holding data files now."""
    table = tables.table(name)
    table.refresh()
    seen = set()
    for task in table.scan().plan_files():
        record = task.file.partition
        cluster = None if record[1] is None else str(record[1])
        seen.add(Partition(name, EPOCH_DAY + timedelta(days=int(record[0])), cluster))
    return sorted(seen, key=Partition.sort_key)


def file_count(tables: FleetTables, part: Partition) -> int:
    table = tables.table(part.table)
    table.refresh()
    return sum(1 for _ in table.scan(row_filter=part.row_filter()).plan_files())


@contextlib.contextmanager
def quiet_empty_delete() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Delete operation did not match any records")
        yield


def retrying(table: Table, job: Callable[[], T], attempts: int = 10) -> T:
    """Run a read-then-commit job again after a commit conflict (a committer appended first, or
    rewrote files the job was replacing: pyiceberg's ValidationException)."""
    from pyiceberg.exceptions import CommitFailedException, ValidationException

    for attempt in range(attempts):
        try:
            return job()
        except (CommitFailedException, ValidationException):
            table.refresh()
            time.sleep(min(1.0, 0.05 * 2**attempt))
    raise RuntimeError(f"{table.name()}: still conflicting after {attempts} attempts")


def compaction_allowed(part: Partition, raw_retention_days: int, now: datetime) -> bool:
    """False for a partition that retention drops now or within a day (its day is not after
    `now - raw_retention_days`). Retention rolls a partition up, records which files it rolled
    up and deletes exactly those (`drop_raw`); a compaction beside it (both are upkeep tasks,
    sent together) would replace them by a file whose rows are already rolled up, which a later
    roll-up would count twice. Compacting a partition about to go is wasted work anyway."""
    return part.day > (now - timedelta(days=raw_retention_days)).date()


def compact(tables: FleetTables, part: Partition, min_files: int = 2) -> int:
    """Rewrite the partition's committed files below `rewrite.LARGE_BYTES` as few files sorted by
    time (`rewrite.packed`: groups of at most LARGE_BYTES each, large files left as they are);
    returns the files replaced (0: none, fewer than `min_files` small files)."""
    table = tables.table(part.table)

    def one_group() -> int:  # the committed files only: staged ones are the committer's
        table.refresh()
        tasks = list(table.scan(row_filter=part.row_filter()).plan_files())
        small = [t for t in tasks if t.file.file_size_in_bytes < LARGE_BYTES]
        groups = packed(small) if len(small) >= min_files else []
        return rewrite(table, part.table, groups[0]) if groups else 0

    replaced = 0  # each rewrite leaves fewer files, so this ends
    while done := retrying(table, one_group):
        replaced += done
    if replaced:
        log.info("compacted %s %s %s: %d files", part.table, part.day, part.cluster, replaced)
    return replaced


@dataclass(frozen=True)
class RolledUp:
    """What one roll-up of a partition did: the partition's roll-up rows now, and the raw data
    files their samples came from (every file of the partition at the snapshot it read)."""

    rows: int
    files: tuple[DataFile, ...]


def roll_up(tables: FleetTables, part: Partition) -> int:
    """Merge the partition's raw samples into gpu_samples_1h; returns its roll-up rows."""
    return _roll_up(tables, part).rows


def _roll_up(tables: FleetTables, part: Partition) -> RolledUp:
    """The partition may have been rolled up before: its raw rows were dropped at retention and
    late rows arrived since (a spool replayed weeks later, an import), or a retention run died
    between the roll-up and the delete. So only the raw files the stored rows do not hold yet
    (the record in the roll-up table, warehouse.fleet.rollup) are rolled up and merged into
    them, and the record is replaced in the same commit: a re-run merges nothing twice."""
    raw_table = tables.table("gpu_samples")
    raw_table.refresh()
    snapshot = raw_table.current_snapshot()
    if snapshot is None:
        return RolledUp(0, ())
    tasks = list(
        raw_table.scan(row_filter=part.row_filter(), snapshot_id=snapshot.snapshot_id).plan_files()
    )
    files = {t.file.file_path for t in tasks}
    target = tables.rollup_table(ROLLUP_1H, rollup_schema())

    def job() -> RolledUp:
        target.refresh()
        evolve(target)
        schema = target.schema().as_arrow()
        stored = target.scan(row_filter=part.row_filter()).to_arrow().cast(schema)
        fresh = [
            t for t in tasks if t.file.file_path not in rolled_files(target, part.day, part.cluster)
        ]
        if not fresh:
            return RolledUp(stored.num_rows, tuple(t.file for t in tasks))
        raw = to_contract("gpu_samples", _read(raw_table, fresh, part))
        rows = merge_rows(stored, rollup_rows(raw).cast(schema)).cast(schema)
        with quiet_empty_delete(), target.transaction() as tx:  # a first roll-up replaces nothing
            tx.overwrite(rows, overwrite_filter=part.row_filter())
            tx.set_properties({rolled_key(part.day, part.cluster): rolled_record(files)})
        return RolledUp(rows.num_rows, tuple(t.file for t in tasks))

    return retrying(target, job)


def _read(table: Table, tasks: list[FileScanTask], part: Partition) -> pa.Table:
    """The rows of exactly these data files (pyiceberg's own delete reads files so)."""
    from pyiceberg.expressions import parser
    from pyiceberg.io.pyarrow import ArrowScan

    scan = ArrowScan(table.metadata, table.io, table.schema(), parser.parse(part.row_filter()))
    return scan.to_table(tasks)


def drop_raw(tables: FleetTables, part: Partition) -> int:
    """Raw retention for one partition. gpu_samples is rolled up first (roll-ups are kept), and
    exactly the files rolled up are deleted: a file a gateway appended meanwhile stays for the
    next run. Other tables: the partition's files. Whole files go, Iceberg rewrites nothing."""
    if part.table != "gpu_samples":
        table = tables.table(part.table)
        files = file_count(tables, part)

        def by_filter() -> int:
            table.refresh()
            table.delete(delete_filter=part.row_filter())
            return files

        return retrying(table, by_filter)
    rolled = _roll_up(tables, part)
    deleted = _delete_files(tables.table(part.table), part, rolled.files)
    target = tables.rollup_table(ROLLUP_1H, rollup_schema())

    def forget() -> None:  # those files are gone: the record would only grow the metadata
        target.refresh()
        key = rolled_key(part.day, part.cluster)
        if key in target.properties:
            target.transaction().remove_properties(key).commit_transaction()

    retrying(target, forget)
    return deleted


def _delete_files(table: Table, part: Partition, files: tuple[DataFile, ...]) -> int:
    def job() -> int:
        table.refresh()
        live = {t.file.file_path for t in table.scan(row_filter=part.row_filter()).plan_files()}
        gone = [f for f in files if f.file_path in live]
        if gone:
            with table.transaction() as tx, tx.update_snapshot().overwrite() as overwrite:
                for data_file in gone:
                    overwrite.delete_data_file(data_file)
        return len(gone)

    return retrying(table, job)


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
    table = tables.existing(name)
    if table is None:
        return 0
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
            ledger.settle(conn, flushes, now)  # claims of older builds' gateway flushes
            staging.settle(conn, flushes)  # files a committer died before marking
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
        staging.prune(conn, cutoff)  # committed files: the table's metadata holds them
    log.info("ledger: forgot %d batch ids claimed before %s", pruned, cutoff.isoformat())
    return pruned
