"""The quantile-sketch store: pane sketches kept as Parquet under `analyzers.sketches_dir`
(`<data_dir>/sketches`) in three tiers, 10 s panes, 1 min and 1 h, read through DuckDB views.

Sketches are derived data, like findings: the analyzers write them (never the telemetry writer),
one window at a time, in the layout and with the manifest swap of `warehouse.segments`
(`SegmentStore`: sealed files, `manifest.json` swapped atomically, retired files kept for a grace
period) and `warehouse.compaction`. Two views, each the union of its tiers' tables
(`sketch_panes_10s`, `sketch_panes_60s`, `sketch_panes_3600s`, ...):

    sketch_panes    pane_start, resolution_s, metric, cluster, team, job_id, host, gpu_index,
                    count, value_sum, top, bottom
    sketch_buckets  pane_start, resolution_s, metric, cluster, team, job_id, host, gpu_index,
                    bucket, count

Tiers. Every tier is built from the samples, an hour (the hour tier: a day) at a time: a minute's
sketch is by construction the lossless merge of its six panes (the sketch's merge equals one-pass
ingest bit for bit), so nothing is read back to roll up, and memory is bounded by one slice.
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
range edges finer than the kept tiers are left out. `group_sketches` merges them per cluster,
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
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analyzers.accounting.frames import partition_of, table_exists, ts_literal
from analyzers.quantiles.panes import (
    BUCKET_SCHEMA,
    METRICS,
    PANE_S,
    PANE_SCHEMA,
    arrow,
    build,
    grouped,
    merged,
    values_sql,
)
from analyzers.run.clock import align_down
from analyzers.run.parts import WHOLE, Scope, Whole
from fleetscope.errors import ConfigError
from warehouse.compaction import compact
from warehouse.segments import Segment, SegmentStore, read_manifest

if TYPE_CHECKING:
    from analyzers.base import JobCatalog
    from analyzers.run.window import Window
    from analyzers.sketch.core import QuantileSketch
    from fleetscope.settings import Settings

PANES = "sketch_panes"
BUCKETS = "sketch_buckets"
ROLLUPS = (60, 3600)  # the 1 min and 1 h
KEYS = ("metric", "cluster", "team", "job_id", "host", "gpu_index")
COMPACT_AFTER_FILES = 32  # merge a day's small files once there are this many
COMPACT_TARGET_BYTES = 64 << 20


def _store_schema(schema: pa.Schema) -> pa.Schema:
    fields = list(schema)
    fields.insert(1, pa.field("resolution_s", pa.int32()))
    fields.insert(4, pa.field("team", pa.string()))
    return pa.schema(fields)


TABLES: Mapping[str, pa.Schema] = {
    PANES: _store_schema(PANE_SCHEMA),
    BUCKETS: _store_schema(BUCKET_SCHEMA),
}
_COLUMNS = {name: ", ".join(schema.names) for name, schema in TABLES.items()}


@dataclass(frozen=True, slots=True)
class Kept:
    """What one `keep` call stored: rows per resolution, and where the partition's marks are."""

    rows: dict[int, int]
    marks: dict[int, datetime]


def tier_table(name: str, resolution_s: int) -> str:
    """The store table of one resolution: tiers live in their own files so that each can have
    its own retention (whole days are dropped)."""
    return f"{name}_{resolution_s}s"


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
        if pane_s <= 0 or pane_s >= 60 or 60 % pane_s:
            raise ConfigError(f"analyzers.sketch_pane_s must divide 60 and be below it: {pane_s}")
        self.root = root
        self.pane_s = pane_s
        self.grace_s = grace_s
        self.tiers = (pane_s, *ROLLUPS)
        self.retention_s = {res: (retention_s or {}).get(res) for res in self.tiers}
        self.tables = {
            tier_table(name, res): schema for name, schema in TABLES.items() for res in self.tiers
        }

    @classmethod
    def from_settings(cls, settings: Settings) -> QuantileStore:
        pane_s = settings.analyzers.sketch_pane_s
        keep = {
            pane_s: settings.analyzers.sketch_pane_retention_s,
            60: settings.analyzers.sketch_minute_retention_s,
            3600: settings.analyzers.sketch_hour_retention_s,
        }
        return cls(
            settings.path(settings.analyzers.sketches_dir, "sketches"),
            pane_s,
            settings.warehouse.segment_grace_s,
            {res: (s if s > 0 else None) for res, s in keep.items()},
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
    ) -> Kept:
        """Store every tier's whole panes of the window past the partition's marks.

        `cluster`: the connection holds one cluster's rows only (fleet mode cuts a window per
        cluster): the partition's marks and a rebuild's replaced rows are that cluster's.

        Each tier (10 s, 1 min, 1 h) is built straight from the samples, an hour (a day for the
        hour tier) at a time so memory stays bounded: by the sketch's lossless merge that equals
        merging the finer panes, bit for bit (tests/analyzers/quantiles), without reading them
        back. Panes older than a tier's retention are skipped and expired days are retired."""
        part = f"{window.partition}/{window.partitions}{_scope_key(cluster)}"
        rows = dict.fromkeys(self.tiers, 0)
        newest = _newest_sample_s(conn, window)  # None: no sample since the window's start
        now = window.end.timestamp() if newest is None else newest
        # One build per partition at a time (its marks are its own); partitions build in
        # parallel and take the store-wide lock only to swap each slice in.
        self.root.mkdir(parents=True, exist_ok=True)
        lock = (
            f".lock-{window.partition}-{window.partitions}{_scope_key(cluster).replace('@', '-')}"
        )
        with _flock(self.root / lock):
            files = SegmentStore(self.root, compression="zstd")
            # a tier a cluster's part has not built yet goes on from its slice's mark, which
            # covered every cluster (a store kept before fleet mode cut windows per cluster)
            whole = _marks(files, f"{window.partition}/{window.partitions}")
            marks = {**whole, **_marks(files, part)}
            for res in self.tiers:
                mark = marks.get(res)
                end = align_down(window.end, res)
                # A window ending at or behind the mark re-runs time already built (late data:
                # a replayed spool, an import, an out-of-order window, a backfill): its range is
                # built again and replaces what is stored. The clock's window always ends past
                # the mark (its end advances every tick), so it only adds the panes after it.
                rebuild = mark is not None and window.end <= mark
                start = align_down(window.start, res) if rebuild or mark is None else mark
                keep_s = self.retention_s[res]
                if keep_s is not None:
                    start = max(start, align_down(_utc(now - keep_s), res))
                slice_s = 86400 if res >= 3600 else 3600
                at = start
                while at < end:
                    stop = min(end, align_down(at, slice_s) + timedelta(seconds=slice_s))
                    tables = _tier_rows(conn, window, catalog, res, at, stop)
                    rows[res] += tables[BUCKETS].num_rows
                    named = {tier_table(name, res): t for name, t in tables.items()}
                    if rebuild:
                        _replace(self._locked, named, window, at, stop, cluster)
                    else:
                        _add(files, self._locked, named, part, {res: stop}, stop)
                        marks[res] = stop
                    at = stop
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
        return Kept(rows, {res: at for res, at in marks.items()})

    def _expire(self, store: SegmentStore, now: float) -> None:
        """Retire the files of days that ended before a tier's retention cutoff."""
        manifest = store.snapshot()
        for res, keep_s in self.retention_s.items():
            if keep_s is None:
                continue
            cutoff_day = _utc(now - keep_s).date().isoformat()
            for name in TABLES:
                table = tier_table(name, res)
                old = [s for s in manifest.live(table) if s.date < cutoff_day]
                if old:
                    store.swap({table: (old, [])})

    # -- reading --------------------------------------------------------------------------------

    def attach(self, conn: duckdb.DuckDBPyConnection) -> None:
        """(Re)define temp views sketch_panes and sketch_buckets on `conn` over the live files."""
        attach(conn, self.root)

    def connect(self) -> duckdb.DuckDBPyConnection:
        conn = duckdb.connect(":memory:")
        conn.execute("SET TimeZone = 'UTC'")
        self.attach(conn)
        return conn

    def has_rows(self) -> bool:
        manifest = read_manifest(self.root)
        return any(manifest.live(tier_table(BUCKETS, res)) for res in self.tiers)


def attach(conn: duckdb.DuckDBPyConnection, root: Path) -> None:
    """Temp views over the sketch store at `root` (empty views of the right types when none)."""
    manifest = read_manifest(root)
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
        conn.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT {_COLUMNS[name]} FROM {source}")


def chosen_sql(table: str, start: datetime, end: datetime, where: str = "TRUE") -> str:
    """Rows of `table` (a store view) for [start, end): per sketch key, the 1 h rows inside the
    range, the 1 min rows inside it no used hour covers, the panes no used minute or hour covers."""
    rng = (
        f"pane_start >= {ts_literal(start)} "
        f"AND pane_start + to_seconds(resolution_s) <= {ts_literal(end)} AND ({where})"
    )
    same = " AND ".join(f"x.{k} IS NOT DISTINCT FROM c.{k}" for k in KEYS)
    cover = f"SELECT DISTINCT {', '.join(KEYS)}, epoch_ms(pane_start) AS at_ms FROM {PANES}"
    return f"""
        SELECT x.* EXCLUDE (hour_ms, minute_ms) FROM (
            SELECT *, epoch_ms(pane_start) // 3600000 * 3600000 AS hour_ms,
                   epoch_ms(pane_start) // 60000 * 60000 AS minute_ms
            FROM {table} WHERE {rng}) x
        ANTI JOIN ({cover} WHERE resolution_s = 3600 AND {rng}) c
            ON {same} AND x.hour_ms = c.at_ms AND x.resolution_s < 3600
        ANTI JOIN ({cover} WHERE resolution_s = 60 AND {rng}) c
            ON {same} AND x.minute_ms = c.at_ms AND x.resolution_s < 60
    """


def group_sketches(
    conn: duckdb.DuckDBPyConnection,
    metric: str,
    keys: Sequence[str],
    start: datetime,
    end: datetime,
    where: str = "TRUE",
) -> dict[tuple[object, ...], QuantileSketch]:
    """One merged sketch per distinct `keys` of `metric`'s rows in [start, end) that satisfy the
    SQL condition `where` (views attached)."""
    where = "metric = '" + metric.replace("'", "''") + f"' AND ({where})"
    return merged(
        conn,
        chosen_sql(BUCKETS, start, end, where),
        chosen_sql(PANES, start, end, where),
        keys,
    )


def _scope_key(cluster: Scope) -> str:
    """The marks' key suffix of a cluster's builds: quoted, so a `/` in a name cannot reach
    into another key, and `@` so no key is a prefix of the whole partition's."""
    if isinstance(cluster, Whole):
        return ""
    return "@" + ("%" if cluster is None else quote(cluster, safe=""))  # quote never ends in %


def _marks(store: SegmentStore, part: str) -> dict[int, datetime]:
    prefix = f"quantiles/{part}/"
    out = {}
    for key, value in store.snapshot().marks.items():
        if key.startswith(prefix):
            out[int(key.removeprefix(prefix).removesuffix("s"))] = datetime.fromisoformat(value)
    return out


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
        store.swap(
            changes, {f"quantiles/{part}/{res}s": ts.isoformat() for res, ts in marks.items()}
        )


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
                _without(store.root / s.path, fresh.schema, window, start, end, cluster)
                for s in old
            ]
            merged = pa.concat_tables([*kept, fresh])
            changes[name] = (old, store.write(name, merged, int(end.timestamp()), "pane_start"))
        store.swap(changes)


def _without(
    path: Path,
    schema: pa.Schema,
    window: Window,
    start: datetime,
    end: datetime,
    cluster: Scope = WHOLE,
) -> pa.Table:
    """A stored file's rows minus the window's partition's rows of [start, end) (rows without a
    job belong to partition 0, as `_tier_rows` keeps them), of `cluster` only when one."""
    table = pq.read_table(path, schema=schema)
    ts = table.column("pane_start")
    in_range = pc.and_(
        pc.greater_equal(ts, pa.scalar(start, ts.type)), pc.less(ts, pa.scalar(end, ts.type))
    )
    jobs = table.column("job_id")
    if window.partitions == 1:
        ours = pa.scalar(True)
    else:
        names = [j for j in pc.unique(jobs).drop_null().to_pylist()]
        mine = [j for j in names if partition_of(j, window.partitions) == window.partition]
        ours = pc.if_else(
            pc.is_null(jobs), window.partition == 0, pc.is_in(jobs, pa.array(mine, jobs.type))
        )
    if not isinstance(cluster, Whole):
        column = table.column("cluster")
        same = pc.is_null(column) if cluster is None else pc.equal(column, cluster)
        ours = pc.and_(ours, pc.fill_null(same, False))
    return table.filter(pc.invert(pc.and_(in_range, ours)))


def _newest_sample_s(conn: duckdb.DuckDBPyConnection, window: Window) -> float | None:
    """Epoch seconds of the warehouse's newest GPU sample, None when none since the window's
    start (then there is nothing to build, nor a clock to expire by). Only samples from the
    window's start on are read, so the embedded scheduler's every tick does not scan the whole
    history."""
    newest = None
    if table_exists(conn, "gpu_samples"):
        conn.complete()
        found = conn.execute(
            f"SELECT epoch(max(ts)) FROM gpu_samples WHERE ts >= {ts_literal(window.start)}"
        ).fetchone()
        newest = found[0] if found else None
    return float(newest) if newest is not None else None


def _utc(epoch_s: float) -> datetime:
    return datetime.fromtimestamp(epoch_s, UTC)


def _team_table(jobs: pa.Array, catalog: JobCatalog) -> pa.Table:
    names = [str(j) for j in pc.unique(jobs).drop_null().to_pylist()]
    teams = []
    for job in names:
        info = catalog.get(job)
        teams.append(info.team if info else None)
    return pa.table({"job_id": pa.array(names, pa.string()), "team": pa.array(teams, pa.string())})


def _tier_rows(
    conn: duckdb.DuckDBPyConnection,
    window: Window,
    catalog: JobCatalog,
    res: int,
    start: datetime,
    end: datetime,
) -> dict[str, pa.Table]:
    """The `res`-second panes of [start, end) of the window's partition with their team; rows
    without a job are kept by partition 0 only."""
    source = values_sql(window, res, list(METRICS.values()), start, end)
    if window.partition != 0:
        source = f"SELECT * FROM ({source}) WHERE job_id IS NOT NULL"
    # Panes of the finest tier hold a sample or two (10 s panes of 10 s samples): numpy's one
    # sort beats a hash group per pane there; roll-up tiers hold many values per group.
    panes, buckets = build(conn, source) if res < 60 else grouped(conn, source)
    conn.register("_fs_teams", _team_table(panes.column("job_id"), catalog))
    try:
        out = {}
        for name, built in ((PANES, panes), (BUCKETS, buckets)):
            conn.register("_fs_tier_rows", built)
            select = _COLUMNS[name].replace("resolution_s", f"{int(res)} AS resolution_s")
            out[name] = arrow(
                conn, f"SELECT {select} FROM _fs_tier_rows LEFT JOIN _fs_teams USING (job_id)"
            ).cast(TABLES[name])
            conn.unregister("_fs_tier_rows")
        return out
    finally:
        conn.unregister("_fs_teams")
