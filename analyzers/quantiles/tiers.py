"""The quantile-sketch store of embedded mode: pane sketches kept as Parquet under
`analyzers.sketches_dir` (`<data_dir>/sketches`) in three tiers, 10 s panes, 1 min and 1 h, read
through DuckDB views. Fleet mode keeps the same rows in the fleet's Iceberg storage
(`analyzers.quantiles.fleet_store`); readers and the runner get either from
`analyzers.quantiles.store.open_store` and never ask which. What both keep and how they read is
below; the pane-building SQL, the marks and the rebuild filter are `store_rows`, shared.

Sketches are derived data, like findings: the analyzers write them (never the telemetry writer),
one window at a time, in the layout and with the manifest swap of `warehouse.storage.segments`
(`SegmentStore`: sealed files, `manifest.json` swapped atomically, retired files kept for a grace
period) and `warehouse.storage.compaction`. Two views, each the union of its tiers' tables
(`sketch_panes_10s`, `sketch_panes_60s`, `sketch_panes_3600s`, ...):

    sketch_panes    pane_start, resolution_s, metric, cluster, team, job_id, host, gpu_index,
                    count, value_sum, top, bottom
    sketch_buckets  pane_start, resolution_s, metric, cluster, team, job_id, host, gpu_index,
                    bucket, count

Tiers. Every tier is built from the samples, an hour (the hour tier: a day) at a time, runs of
small hours in one build (`store_rows.built_slices`): a minute's sketch is by construction the
lossless merge of its six panes (the sketch's merge equals one-pass ingest bit for bit), so
nothing is read back to roll up, and memory is bounded by one slice or one build's cap.
Each tier has its own retention (`analyzers.sketch_*_retention_s`), counted back from the newest
GPU sample: 10 s panes of 10 s samples hold one value each, as many rows as the telemetry itself,
so they are kept for hours, minutes for a day, hours for a year; older slices are never built and
expired days are retired.

Watermarks. Each partition (`p/n`, as the analyzer windows) keeps one mark per tier in the
manifest's `marks`: a tier's panes are kept once, from the mark to the window's last whole pane,
so a re-run or a later run of the same bucket adds only new panes (the runner re-analyzes a bucket
from its start on every tick; the store does not). A window that ends at or behind the mark
re-runs time already built: the samples of a replayed spool, an import, a fleet first seen with
day-old data (the scheduler runs the current bucket first, then the buckets the arrival marks
owe), an out-of-order Celery window or a backfill. Its whole panes are built again and replace
that partition's rows of the range in the day's files (`_replace`), so late samples are counted
and nothing twice. Late samples for panes behind the mark inside the clock's current window are
not rebuilt (the clock window only adds panes past the mark): `analyzers.lateness_s` covers them.

Reading. A query over [start, end) takes, per sketch key, the coarsest rows that lie inside the
range and no finer row they cover (`chosen_sql`), so nothing counts twice whatever tiers exist;
range edges finer than the kept tiers are left out. Finer tiers are read only where the marks
(attached as `sketch_built`) leave a coarser unit in doubt (`reading.read_spans`). `group_sketches` merges them per cluster,
team, job or host.

Locks (Celery workers of several partitions share the folder): a partition's builds take its own
file lock (its marks are its own), and every manifest swap the store-wide one, so partitions
build in parallel; a rebuild rewrites its day's files under the store-wide lock. This module
must never write telemetry nor open the telemetry DuckDB file.
"""

from __future__ import annotations

import fcntl
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from analyzers.quantiles.panes import PANE_S
from analyzers.quantiles.reading import chosen_sql, group_sketches
from analyzers.quantiles.store_rows import (
    BUCKETS,
    COLUMNS,
    PANES,
    TABLES,
    Kept,
    Span,
    attach_built,
    built_slices,
    marks_in,
    newest_sample_s,
    part_key,
    retention_of,
    span,
    tier_table,
    tiers_of,
    utc,
    without,
)
from analyzers.run.parts import WHOLE, Scope
from warehouse.storage.compaction import compact
from warehouse.storage.segments import Segment, SegmentStore, read_manifest

if TYPE_CHECKING:
    from analyzers.base import JobCatalog
    from analyzers.run.window import Window
    from fleetscope.settings import Settings

__all__ = [
    "BUCKETS",
    "PANES",
    "TABLES",
    "Kept",
    "QuantileStore",
    "attach",
    "chosen_sql",
    "group_sketches",
    "tier_table",
]

COMPACT_AFTER_FILES = 32  # merge a day's small files once there are this many
COMPACT_TARGET_BYTES = 64 << 20
MARKS = "quantiles/"  # the manifest's marks: quantiles/<p>/<n>[@cluster]/<res>s


class QuantileStore:
    """The sketch folder: `keep` a window's panes (the runner), `attach` views (readers).

    `retention_s` maps a resolution to how long its rows are kept (None: forever), counted back
    from the newest GPU sample in the warehouse (not the wall clock, so a replayed or backfilled
    history keeps the same tiers as a live one): panes older than that are never built, and
    files of days past it are retired on the next `keep`."""

    def __init__(
        self,
        root: Path,
        pane_s: int = PANE_S,
        grace_s: float = 300.0,
        retention_s: Mapping[int, float | None] | None = None,
    ) -> None:
        self.root = root
        self.pane_s = pane_s
        self.grace_s = grace_s
        self.tiers = tiers_of(pane_s)
        self.retention_s = {res: (retention_s or {}).get(res) for res in self.tiers}
        self.tables = {
            tier_table(name, res): schema for name, schema in TABLES.items() for res in self.tiers
        }

    @classmethod
    def from_settings(cls, settings: Settings) -> QuantileStore:
        return cls(
            settings.path(settings.analyzers.sketches_dir, "sketches"),
            settings.analyzers.sketch_pane_s,
            settings.warehouse.segment_grace_s,
            retention_of(settings),
        )

    # -- writing --------------------------------------------------------------------------------

    @contextmanager
    def _locked(self) -> Iterator[SegmentStore]:
        """The manifest, read and swapped under the store-wide lock (held for a swap, not a build)."""
        with _flock(self.root / ".lock"):
            # read the manifest under the lock: another process may have swapped it
            yield SegmentStore(self.root, compression="zstd")

    def keep(
        self,
        conn: duckdb.DuckDBPyConnection,
        window: Window,
        catalog: JobCatalog,
        cluster: Scope = WHOLE,
        hosts: Sequence[Sequence[str]] = (),
    ) -> Kept:
        """Store every tier's whole panes of the window past the partition's marks.

        `cluster`: the connection holds one cluster's rows only (fleet mode cuts a window per
        cluster): the partition's marks and a rebuild's replaced rows are that cluster's.
        `hosts`: each hour's panes are built a host slice at a time (analyzers.run.slices), so
        DuckDB's working set follows a slice, not the fleet; stored once, with the window's marks.

        Each tier (10 s, 1 min, 1 h) is built straight from the samples, an hour (a day for the
        hour tier) at a time so memory stays bounded: by the sketch's lossless merge that equals
        merging the finer panes, bit for bit (tests/analyzers/quantiles), without reading them
        back. Only the slices that hold samples are built (one query finds them), runs of small
        ones in one build (`store_rows.built_slices`), so the cost follows the data, not the
        window's length. Panes older than a tier's retention are
        skipped and expired days are retired."""
        part = part_key(window, cluster)
        rows = dict.fromkeys(self.tiers, 0)
        newest = newest_sample_s(conn, window)  # None: no sample since the window's start
        now = window.end.timestamp() if newest is None else newest
        # One build per partition at a time (its marks are its own); partitions build in
        # parallel and take the store-wide lock only to swap each slice in.
        self.root.mkdir(parents=True, exist_ok=True)
        lock = ".lock-" + part.replace("/", "-").replace("@", "-")
        with _flock(self.root / lock):
            files = SegmentStore(self.root, compression="zstd")
            marks = marks_in(files.snapshot().marks, MARKS, window, cluster)
            for res in self.tiers:
                todo = span(window, res, marks.get(res), self.retention_s[res], now)
                self._keep_tier(
                    conn, window, catalog, cluster, res, todo, files, marks, rows, hosts
                )
        with self._locked() as store:
            if newest is not None:  # a window with no sample (the clock's, over a replayed
                self._expire(store, newest)  # day-old fleet) must not expire by the wall clock
            manifest = store.snapshot()
            if any(
                len(segs) >= COMPACT_AFTER_FILES
                for t in self.tables
                for segs in manifest.by_date(t).values()
            ):
                compact(store, COMPACT_TARGET_BYTES, self.tables)
            store.purge_retired(self.grace_s)
        return Kept(rows, dict(marks))

    def _keep_tier(
        self,
        conn: duckdb.DuckDBPyConnection,
        window: Window,
        catalog: JobCatalog,
        cluster: Scope,
        res: int,
        todo: Span,
        files: SegmentStore,
        marks: dict[int, datetime],
        rows: dict[int, int],
        hosts: Sequence[Sequence[str]] = (),
    ) -> None:
        """Store tier `res`'s panes of `todo` a slice at a time, only the slices that hold rows,
        several built at once (`built_slices`): an empty slice builds nothing, so skipping it
        stores the same rows. Skipped slices still do what their empty build did: past the mark,
        the mark moves on (once, with the next slice built or at the end); in a rebuild, the
        partition's stored rows of their range go (one `_replace` per run of empty slices of a
        day, the same rows in the same order as one per slice)."""
        part = part_key(window, cluster)
        empty = {tier_table(name, res): schema.empty_table() for name, schema in TABLES.items()}
        gap: tuple[datetime, datetime] | None = None  # a rebuild's empty run, not yet replaced
        last: datetime | None = None  # the end of the last slice, built or skipped
        for at, stop, tables in built_slices(conn, window, catalog, res, todo, hosts):
            last = stop
            if tables is None:
                if todo.rebuild:
                    if gap is not None and gap[0].date() != at.date():
                        _replace(self._locked, empty, window, *gap, cluster)
                        gap = None
                    gap = (gap[0] if gap else at, stop)
                continue
            if gap is not None:
                _replace(self._locked, empty, window, *gap, cluster)
                gap = None
            rows[res] += tables[BUCKETS].num_rows
            named = {tier_table(name, res): t for name, t in tables.items()}
            if todo.rebuild:
                _replace(self._locked, named, window, at, stop, cluster)
            else:
                _add(files, self._locked, named, part, {res: stop}, stop)
                marks[res] = stop
        if gap is not None:
            _replace(self._locked, empty, window, *gap, cluster)
        if not todo.rebuild and last is not None and marks.get(res) != last:
            _add(files, self._locked, {}, part, {res: last}, last)  # the mark past empty slices
            marks[res] = last

    def _expire(self, store: SegmentStore, now: float) -> None:
        """Retire the files of days that ended before a tier's retention cutoff."""
        manifest = store.snapshot()
        for res, keep_s in self.retention_s.items():
            if keep_s is None:
                continue
            cutoff_day = utc(now - keep_s).date().isoformat()
            for name in TABLES:
                table = tier_table(name, res)
                old = [s for s in manifest.live(table) if s.date < cutoff_day]
                if old:
                    store.swap({table: (old, [])})

    # -- reading --------------------------------------------------------------------------------

    def attach(
        self,
        conn: duckdb.DuckDBPyConnection,
        start: datetime | None = None,
        end: datetime | None = None,
    ) -> None:
        """(Re)define temp views sketch_panes and sketch_buckets on `conn` over the live files
        (all of them: a range does not narrow a local read)."""
        attach(conn, self.root)

    def connect(
        self, start: datetime | None = None, end: datetime | None = None
    ) -> duckdb.DuckDBPyConnection:
        conn = duckdb.connect(":memory:")
        conn.execute("SET TimeZone = 'UTC'")
        self.attach(conn, start, end)
        return conn

    def has_rows(self) -> bool:
        manifest = read_manifest(self.root)
        return any(manifest.live(tier_table(BUCKETS, res)) for res in self.tiers)


def attach(conn: duckdb.DuckDBPyConnection, root: Path) -> None:
    """Temp views over the sketch store at `root` (empty views of the right types when none),
    and its marks as `store_rows.BUILT`, from the same manifest."""
    manifest = read_manifest(root)
    attach_built(conn, manifest.marks, MARKS)
    for name, schema in TABLES.items():
        tiers = [t for t in manifest.tables if t == name or t.startswith(f"{name}_")]
        files = [str(root / s.path) for t in sorted(tiers) for s in manifest.live(t)]
        if files:
            listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
            source = f"read_parquet([{listed}], hive_partitioning = false)"
        else:
            conn.register("_fs_empty", schema.empty_table())
            conn.execute(f"CREATE OR REPLACE TEMP TABLE _empty_{name} AS SELECT * FROM _fs_empty")
            conn.unregister("_fs_empty")
            source = f"_empty_{name}"
        conn.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT {COLUMNS[name]} FROM {source}")


@contextmanager
def _flock(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _add(
    files: SegmentStore,
    locked: Callable[[], AbstractContextManager[SegmentStore]],
    tables: Mapping[str, pa.Table],
    part: str,
    marks: Mapping[int, datetime],
    at: datetime,
) -> None:
    """Write the tables as sealed files (no lock), then make them live with the marks in one
    swap under the store-wide lock."""
    seq = int(at.timestamp())
    written = {
        name: files.write(name, table, seq, ts_column="pane_start")
        for name, table in tables.items()
    }
    changes: dict[str, tuple[list[Segment], list[Segment]]] = {
        name: ([], segs) for name, segs in written.items()
    }
    with locked() as store:
        store.swap(changes, {f"{MARKS}{part}/{res}s": ts.isoformat() for res, ts in marks.items()})


def _replace(
    locked: Callable[[], AbstractContextManager[SegmentStore]],
    tables: Mapping[str, pa.Table],
    window: Window,
    start: datetime,
    end: datetime,
    cluster: Scope = WHOLE,
) -> None:
    """Make `tables` the window's partition's rows of [start, end), one UTC day (a slice never
    spans two): under the store-wide lock, that day's files are rewritten without the rows they
    held for this partition (and cluster, when one) and range, plus the new ones, and swapped in
    at once. Other partitions' rows and the rest of the day stay as they were. Rare (late data
    only), so the whole day's file of a tier is read back."""
    day = start.date().isoformat()
    with locked() as store:
        manifest = store.snapshot()
        changes: dict[str, tuple[list[Segment], list[Segment]]] = {}
        for name, fresh in tables.items():
            old = [s for s in manifest.live(name) if s.date == day]
            kept = [
                without(
                    pq.read_table(store.root / s.path, schema=fresh.schema),
                    window,
                    start,
                    end,
                    cluster,
                )
                for s in old
            ]
            merged = pa.concat_tables([*kept, fresh])
            changes[name] = (old, store.write(name, merged, int(end.timestamp()), "pane_start"))
        store.swap(changes)
