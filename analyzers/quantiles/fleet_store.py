"""The quantile-sketch store of fleet mode: one Iceberg table, `quantile_sketches`, in the fleet's
namespace, so that every worker keeps its clusters' panes in one store and the dashboard and the
CLI on any machine read them all, from the settings alone (no shared folder).

Why one table: a pane's sketch is a pane row and its bucket rows, and the partition's marks must
move in the same commit as the rows they cover (a crash between two commits would keep a pane
twice). Iceberg commits one table atomically, so both kinds of row live in it (a pane row has
`bucket` null, a bucket row `value_sum`, `top` and `bottom` null) and the marks are the table's
properties (`fleetscope.sketch-mark.<p>/<n>[@cluster]/<res>s`), set in the commit that adds the
rows. Partitioned by day(pane_start), cluster and resolution_s, as the telemetry by day and
cluster: a part's commit touches its cluster's partitions only, a tier's retention drops whole
(day, tier) partitions, and a read prunes by time.

The semantics are `analyzers.quantiles.tiers`' (shared code: `store_rows`): panes kept once from
the mark; a window at or behind the mark rebuilds its range and replaces only its partition's
(and cluster's) rows of it, one (tier, day) partition rewrite in one commit; retention per tier
counted back from the newest sample, and a window without samples expires nothing; reading takes
per key the coarsest rows inside the range (`reading.chosen_sql`) over a pruned scan.

Concurrency is Iceberg's optimistic commit: a commit whose base snapshot is no longer current
fails, and the job re-reads and retries (`warehouse.fleet.upkeep.retrying`). Data files are
written before the commit loop, so a retry commits them again without rebuilding. Before adding,
a retry checks that the partition's marks are still where its build started: if another keep of
the same part (a duplicate Celery delivery) moved them first, its panes stand and this one's
files are left for the orphan sweep. A partition (tier, day, cluster) reaching
`COMPACT_AFTER_FILES` files is rewritten as one. Upkeep expires the table's snapshots and sweeps
its orphan files with the others' (`analyzers.run.fleet.upkeep_plan`).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

from analyzers.quantiles.panes import PANE_S
from analyzers.quantiles.store_rows import (
    BUCKETS,
    COLUMNS,
    PANES,
    TABLES,
    Kept,
    attach_built,
    built_slices,
    marks_in,
    newest_sample_s,
    part_key,
    retention_of,
    span,
    tiers_of,
    utc,
    without,
)
from analyzers.run.parts import WHOLE, Scope, Whole
from warehouse.fleet.reader import cluster_filter
from warehouse.fleet.tables import FleetConfig, FleetTables
from warehouse.fleet.upkeep import quiet_empty_delete, retrying

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table

    from analyzers.base import JobCatalog
    from analyzers.run.window import Window
    from fleetscope.settings import Settings

log = logging.getLogger(__name__)

TABLE = "quantile_sketches"
MARKS = "fleetscope.sketch-mark."  # + "<p>/<n>[@cluster]/<res>s": ISO time of the mark
COMPACT_AFTER_FILES = 32  # rewrite a (tier, day, cluster) partition as one file at this many
# Both kinds of row in one schema: a pane row has no bucket, a bucket row no sum or extremes.
ROW_SCHEMA = pa.schema(
    [
        *TABLES[PANES],
        *(f for f in TABLES[BUCKETS] if f.name not in TABLES[PANES].names),
    ]
)


class FleetSketchStore:
    """The sketch store in the fleet's Iceberg storage (the same interface as `QuantileStore`).

    The catalog is opened on first use, once per process and fleet (`_catalog_of`): building a
    pipeline (`Pipeline.from_settings`) reaches no service, and the dashboard's every read does
    not open a database pool of its own. Reads load the table afresh (a Table of their own, so
    the dashboard's threads share none); keeps use the process's cached one, refreshed."""

    def __init__(
        self,
        config: FleetConfig,
        pane_s: int = PANE_S,
        retention_s: Mapping[int, float | None] | None = None,
        tables: FleetTables | None = None,
    ) -> None:
        self.config = config
        self.pane_s = pane_s
        self.tiers = tiers_of(pane_s)
        self.retention_s = {res: (retention_s or {}).get(res) for res in self.tiers}
        self._tables = tables

    @classmethod
    def from_settings(cls, settings: Settings) -> FleetSketchStore:
        return cls(
            FleetConfig.from_settings(settings),
            settings.analyzers.sketch_pane_s,
            retention_of(settings),
        )

    @property
    def fleet(self) -> FleetTables:
        if self._tables is None:
            self._tables = _catalog_of(self.config)
        return self._tables

    def _existing(self) -> Table | None:
        """The table as committed now, None when no keep made it yet."""
        from pyiceberg.exceptions import NoSuchTableError

        try:
            return self.fleet.catalog.load_table(self.fleet.identifier(TABLE))
        except NoSuchTableError:
            return None

    def _table(self) -> Table:
        table = self.fleet.derived_table(TABLE, ROW_SCHEMA, "pane_start", ("resolution_s",))
        table.refresh()
        return table

    # -- writing --------------------------------------------------------------------------------

    def keep(
        self,
        conn: duckdb.DuckDBPyConnection,
        window: Window,
        catalog: JobCatalog,
        cluster: Scope = WHOLE,
        hosts: Sequence[Sequence[str]] = (),
    ) -> Kept:
        """Store every tier's whole panes of the window past the partition's marks, in one commit
        with the marks; rebuild a range at or behind them; expire by the newest sample."""
        rows = dict.fromkeys(self.tiers, 0)
        newest = newest_sample_s(conn, window)  # None: no sample since the window's start
        now = window.end.timestamp() if newest is None else newest
        table = self._table()
        marks = marks_in(table.properties, MARKS, window, cluster)
        started = dict(marks)
        added: list[DataFile] = []
        advanced: dict[int, datetime] = {}
        touched: set[tuple[int, date]] = set()
        for res in self.tiers:
            todo = span(window, res, marks.get(res), self.retention_s[res], now)
            # only the slices that hold rows are built (one query finds them), several at once:
            # another's build is empty, so skipping it keeps the same rows, marks and ranges
            slices_built = built_slices(conn, window, catalog, res, todo, hosts)
            # slices never span two UTC days: a rebuild rewrites each day's partition once
            for _day, group in itertools.groupby(slices_built, key=lambda s: s[0].date()):
                slices = list(group)
                fresh = [ROW_SCHEMA.empty_table()]
                for at, _stop, tables in slices:
                    if tables is None:
                        continue
                    rows[res] += tables[BUCKETS].num_rows
                    built = _as_rows(tables)
                    if todo.rebuild:
                        fresh.append(built)
                    elif built.num_rows:  # written now (memory holds one build), committed below
                        added.extend(_write(table, built))
                        touched.add((res, at.date()))
                if todo.rebuild:
                    start, end = slices[0][0], slices[-1][1]
                    _replace(table, pa.concat_tables(fresh), window, res, start, end, cluster)
                else:
                    marks[res] = advanced[res] = slices[-1][1]
        part = part_key(window, cluster)
        if advanced and not _add(table, part, window, cluster, started, added, advanced):
            marks = marks_in(table.properties, MARKS, window, cluster)
        for res, day in sorted(touched):
            _compact(table, res, day, cluster)
        if newest is not None:  # a window with no sample (the clock's, over a replayed
            self._expire(table, newest)  # day-old fleet) must not expire by the wall clock
        return Kept(rows, dict(marks))

    def _expire(self, table: Table, newest: float) -> None:
        """Delete each tier's days that ended before its retention cutoff (whole partitions)."""
        due = []
        for res, keep_s in self.retention_s.items():
            if keep_s is not None:
                cutoff = utc(newest - keep_s).date()
                day = datetime(cutoff.year, cutoff.month, cutoff.day, tzinfo=UTC)
                due.append(f"resolution_s = {int(res)} AND pane_start < '{day.isoformat()}'")

        def job() -> None:
            table.refresh()
            found = [f for f in due if next(iter(table.scan(row_filter=f).plan_files()), None)]
            if found:
                with quiet_empty_delete(), table.transaction() as tx:
                    for expr in found:
                        tx.delete(delete_filter=expr)

        retrying(table, job)

    # -- reading --------------------------------------------------------------------------------

    def attach(
        self,
        conn: duckdb.DuckDBPyConnection,
        start: datetime | None = None,
        end: datetime | None = None,
    ) -> None:
        """(Re)define temp views sketch_panes and sketch_buckets on `conn` over the table's rows
        as they stand, only the panes starting in [start, end) when given (a pruned scan: whole
        days and tiers outside it are never opened)."""
        found = self._existing()
        rows = ROW_SCHEMA.empty_table()
        attach_built(conn, found.properties if found is not None else {}, MARKS)
        if found is not None:
            terms = []
            if start is not None:
                terms.append(f"pane_start >= '{start.isoformat()}'")
            if end is not None:
                terms.append(f"pane_start < '{end.isoformat()}'")
            scan = found.scan(row_filter=" AND ".join(terms)) if terms else found.scan()
            rows = _from_table(scan.to_arrow())
        conn.register("_fs_sketch_scan", rows)
        conn.execute(
            "CREATE OR REPLACE TEMP TABLE _fs_sketch_rows AS SELECT * FROM _fs_sketch_scan"
        )
        conn.unregister("_fs_sketch_scan")
        for name, kind in ((PANES, "bucket IS NULL"), (BUCKETS, "bucket IS NOT NULL")):
            conn.execute(
                f"CREATE OR REPLACE TEMP VIEW {name} AS "
                f"SELECT {COLUMNS[name]} FROM _fs_sketch_rows WHERE {kind}"
            )

    def connect(
        self, start: datetime | None = None, end: datetime | None = None
    ) -> duckdb.DuckDBPyConnection:
        conn = duckdb.connect(":memory:")
        conn.execute("SET TimeZone = 'UTC'")
        self.attach(conn, start, end)
        return conn

    def has_rows(self) -> bool:
        found = self._existing()
        if found is None:
            return False
        return (
            next(iter(found.scan(row_filter="bucket IS NOT NULL").plan_files()), None) is not None
        )


@cache
def _catalog_of(config: FleetConfig) -> FleetTables:
    return FleetTables(config)


def _as_rows(tables: Mapping[str, pa.Table]) -> pa.Table:
    """A slice's pane and bucket tables as rows of the one table (the other kind's columns null)."""

    def fit(table: pa.Table) -> pa.Table:
        columns = [
            table.column(f.name) if f.name in table.schema.names else pa.nulls(len(table), f.type)
            for f in ROW_SCHEMA
        ]
        return pa.Table.from_arrays(columns, schema=ROW_SCHEMA)

    return pa.concat_tables([fit(tables[PANES]), fit(tables[BUCKETS])])


def _from_table(data: pa.Table) -> pa.Table:
    """Rows read from Iceberg (microseconds, int32) back in the store's exact schema."""
    return data.select(ROW_SCHEMA.names).cast(ROW_SCHEMA)


def _to_table(rows: pa.Table, table: Table) -> pa.Table:
    ordered = rows.sort_by([("resolution_s", "ascending"), ("pane_start", "ascending")])
    return ordered.cast(table.schema().as_arrow())


def _write(table: Table, rows: pa.Table) -> list[DataFile]:
    """Parquet data files of `rows`, one or more per partition, not committed yet."""
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    return list(_dataframe_to_data_files(table.metadata, _to_table(rows, table), table.io))


def _add(
    table: Table,
    part: str,
    window: Window,
    cluster: Scope,
    started: Mapping[int, datetime],
    files: Sequence[DataFile],
    advanced: Mapping[int, datetime],
) -> bool:
    """Commit the files and the advanced marks at once; False when another keep of the same
    part moved its marks first (its panes stand, these files stay unreferenced)."""
    properties = {f"{MARKS}{part}/{res}s": at.isoformat() for res, at in advanced.items()}

    def job() -> bool:
        table.refresh()
        now = marks_in(table.properties, MARKS, window, cluster)
        if any(now.get(res) != started.get(res) for res in advanced):
            log.warning("quantile panes of %s %s kept by another run first", part, window.key())
            return False
        with table.transaction() as tx:
            if files:
                with tx.update_snapshot().fast_append() as append:
                    for data_file in files:
                        append.append_data_file(data_file)
            tx.set_properties(properties)
        return True

    return retrying(table, job)


def _partition_filter(res: int, start: datetime, end: datetime, cluster: Scope) -> str:
    expr = (
        f"resolution_s = {int(res)} AND pane_start >= '{start.isoformat()}' "
        f"AND pane_start < '{end.isoformat()}'"
    )
    return expr if isinstance(cluster, Whole) else f"{expr} AND {cluster_filter([cluster])}"


def _day_of(at: datetime) -> tuple[datetime, datetime]:
    start = datetime(at.year, at.month, at.day, tzinfo=UTC)
    return start, start + timedelta(days=1)


def _replace(
    table: Table,
    fresh: pa.Table,
    window: Window,
    res: int,
    start: datetime,
    end: datetime,
    cluster: Scope,
) -> None:
    """Make `fresh` the window's partition's rows of tier `res` in [start, end) (one UTC day):
    the day's partition (of the cluster, when one) is read, rewritten without the rows it held
    for this partition and range, plus the new ones, in one commit. Rare (late data only)."""
    day = _partition_filter(res, *_day_of(start), cluster)

    def job() -> None:
        table.refresh()
        stored = _from_table(table.scan(row_filter=day).to_arrow())
        rows = pa.concat_tables([without(stored, window, start, end, cluster), fresh])
        with quiet_empty_delete(), table.transaction() as tx:
            if rows.num_rows:
                tx.overwrite(_to_table(rows, table), overwrite_filter=day)
            else:
                tx.delete(delete_filter=day)

    retrying(table, job)


def _compact(table: Table, res: int, day: date, cluster: Scope) -> None:
    """Rewrite the tier's (day, cluster) partition as one file once it holds many."""
    start, end = _day_of(datetime(day.year, day.month, day.day, tzinfo=UTC))
    expr = _partition_filter(res, start, end, cluster)

    def job() -> None:
        table.refresh()
        if sum(1 for _ in table.scan(row_filter=expr).plan_files()) < COMPACT_AFTER_FILES:
            return
        rows = _from_table(table.scan(row_filter=expr).to_arrow())
        table.overwrite(_to_table(rows, table), overwrite_filter=expr)

    retrying(table, job)
