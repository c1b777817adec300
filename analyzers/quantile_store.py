"""The quantile-sketch store: pane sketches kept as Parquet under `analyzers.sketches_dir`
(`<data_dir>/sketches`), rolled up 10 s -> 1 min -> 1 h, and read through DuckDB views.

Sketches are derived data, like findings: the analyzers write them (never the telemetry writer),
one window at a time, in the layout and with the manifest swap of `warehouse.segments`
(`SegmentStore`: sealed files, `manifest.json` swapped atomically, retired files kept for a grace
period) and `warehouse.compaction`. Two tables:

    sketch_panes    pane_start, resolution_s, metric, cluster, team, job_id, host, gpu_index,
                    count, value_sum, top, bottom
    sketch_buckets  pane_start, resolution_s, metric, cluster, team, job_id, host, gpu_index,
                    bucket, count

Watermarks. Each partition (`p/n`, as the analyzer windows) keeps one mark per resolution in the
manifest's `marks`: panes are kept once, from the mark to the window's last whole pane, so a
re-run or a later run of the same bucket adds only new panes (the runner re-analyzes a bucket from
its start on every tick; the store does not). A minute (an hour) is rolled up, by lossless SQL
merge of the finer rows, once the finer mark has passed its end; finer rows stay.

Reading. A query over [start, end) takes, per sketch key, the coarsest rows that lie inside the
range and no finer row they cover (`chosen_sql`), so nothing counts twice whatever has been rolled
up yet; `group_sketches` merges them per cluster, team, job or host. Writers serialize on a file
lock (Celery workers of several partitions share the folder). This module must never write
telemetry nor open the telemetry DuckDB file.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

from analyzers.frames import partition_clause, ts_literal
from analyzers.quantiles import (
    BUCKET_SCHEMA,
    PANE_S,
    PANE_SCHEMA,
    TOP_K,
    SketchFrame,
    arrow,
    merged,
    prepare,
)
from analyzers.schedule import align_down
from fleetscope.errors import ConfigError
from warehouse.compaction import compact
from warehouse.segments import Segment, SegmentStore, read_manifest

if TYPE_CHECKING:
    from analyzers.base import JobCatalog, Window
    from analyzers.sketch import QuantileSketch
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


class QuantileStore:
    """The sketch folder: `keep` a window's panes (the runner), `attach` views (readers)."""

    def __init__(self, root: Path, pane_s: int = PANE_S, grace_s: float = 300.0) -> None:
        if pane_s <= 0 or pane_s >= 60 or 60 % pane_s:
            raise ConfigError(f"analyzers.sketch_pane_s must divide 60 and be below it: {pane_s}")
        self.root = root
        self.pane_s = pane_s
        self.grace_s = grace_s

    @classmethod
    def from_settings(cls, settings: Settings) -> QuantileStore:
        return cls(
            settings.data_path("analyzers.sketches_dir", "sketches"),
            settings.get_int("analyzers.sketch_pane_s"),
            settings.get_float("warehouse.segment_grace_s"),
        )

    # -- writing --------------------------------------------------------------------------------

    @contextmanager
    def _locked(self) -> Iterator[SegmentStore]:
        self.root.mkdir(parents=True, exist_ok=True)
        with (self.root / ".lock").open("a") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:  # read the manifest under the lock: another process may have swapped it
                yield SegmentStore(self.root, compression="zstd")
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def keep(
        self,
        conn: duckdb.DuckDBPyConnection,
        window: Window,
        catalog: JobCatalog,
        frame: SketchFrame | None = None,
    ) -> Kept:
        """Store the window's whole panes past the partition's mark, then roll up what is due."""
        frame = frame or prepare(conn, window, self.pane_s)
        part = f"{window.partition}/{window.partitions}"
        rows = {self.pane_s: 0, **dict.fromkeys(ROLLUPS, 0)}
        with self._locked() as store:
            marks = _marks(store, part)
            start = marks.get(self.pane_s) or align_down(window.start, self.pane_s)
            end = align_down(window.end, self.pane_s)
            if end > start:
                new_marks = {self.pane_s: end}
                for res in ROLLUPS:
                    new_marks[res] = marks.get(res) or align_down(start, res)
                tables = _pane_rows(conn, frame, window, catalog, start, end)
                rows[self.pane_s] = tables[BUCKETS].num_rows
                _add(store, tables, part, new_marks, end)
                marks.update(new_marks)
            finer = self.pane_s
            for res in ROLLUPS:
                lo, hi = marks.get(res), align_down(marks.get(finer) or start, res)
                if lo is not None and hi > lo:
                    tables = _rollup(self.root, window, finer, res, lo, hi)
                    rows[res] = tables[BUCKETS].num_rows
                    _add(store, tables, part, {res: hi}, hi)
                    marks[res] = hi
                finer = res
            manifest = store.snapshot()
            if any(
                len(segs) >= COMPACT_AFTER_FILES
                for t in TABLES
                for segs in manifest.by_date(t).values()
            ):
                compact(store, COMPACT_TARGET_BYTES, TABLES)
            store.purge_retired(self.grace_s)
        return Kept(rows, {res: at for res, at in marks.items()})

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
        return bool(read_manifest(self.root).live(BUCKETS))


def attach(conn: duckdb.DuckDBPyConnection, root: Path) -> None:
    """Temp views over the sketch store at `root` (empty views of the right types when none)."""
    manifest = read_manifest(root)
    for name, schema in TABLES.items():
        files = [str(root / s.path) for s in manifest.live(name)]
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


def _marks(store: SegmentStore, part: str) -> dict[int, datetime]:
    prefix = f"quantiles/{part}/"
    out = {}
    for key, value in store.snapshot().marks.items():
        if key.startswith(prefix):
            out[int(key.removeprefix(prefix).removesuffix("s"))] = datetime.fromisoformat(value)
    return out


def _add(
    store: SegmentStore,
    tables: Mapping[str, pa.Table],
    part: str,
    marks: Mapping[int, datetime],
    at: datetime,
) -> None:
    """Write the tables as sealed files and make them live with the marks in one swap."""
    seq = int(at.timestamp())
    written = {
        name: store.write(name, table, seq, ts_column="pane_start")
        for name, table in tables.items()
    }
    changes: dict[str, tuple[list[Segment], list[Segment]]] = {
        name: ([], files) for name, files in written.items()
    }
    store.swap(changes, {f"quantiles/{part}/{res}s": ts.isoformat() for res, ts in marks.items()})


def _team_table(
    conn: duckdb.DuckDBPyConnection, frame: SketchFrame, catalog: JobCatalog
) -> pa.Table:
    jobs = [
        str(row[0])
        for row in conn.execute(
            f"SELECT DISTINCT job_id FROM {frame.panes} WHERE job_id IS NOT NULL"
        ).fetchall()
    ]
    teams = []
    for job in jobs:
        info = catalog.get(job)
        teams.append(info.team if info else None)
    return pa.table({"job_id": pa.array(jobs, pa.string()), "team": pa.array(teams, pa.string())})


def _pane_rows(
    conn: duckdb.DuckDBPyConnection,
    frame: SketchFrame,
    window: Window,
    catalog: JobCatalog,
    start: datetime,
    end: datetime,
) -> dict[str, pa.Table]:
    """The frame's panes in [start, end) with their team; rows without a job in partition 0 only."""
    conn.register("_fs_teams", _team_table(conn, frame, catalog))
    try:
        out = {}
        for name, temp in ((PANES, frame.panes), (BUCKETS, frame.buckets)):
            select = _COLUMNS[name].replace("resolution_s", f"{frame.pane_s} AS resolution_s")
            table = arrow(
                conn,
                f"""
                SELECT {select} FROM {temp} LEFT JOIN _fs_teams USING (job_id)
                WHERE pane_start >= {ts_literal(start)} AND pane_start < {ts_literal(end)}
                  AND (job_id IS NOT NULL OR {int(window.partition == 0)} = 1)""",
            )
            out[name] = table.cast(TABLES[name])
        return out
    finally:
        conn.unregister("_fs_teams")


def _rollup(
    root: Path, window: Window, finer: int, res: int, lo: datetime, hi: datetime
) -> dict[str, pa.Table]:
    """The `res`-second rows of [lo, hi) of this partition, merged from the `finer` rows."""
    conn = duckdb.connect(":memory:")
    try:
        conn.execute("SET TimeZone = 'UTC'")
        attach(conn, root)
        own = f"(job_id IS NULL AND {window.partition} = 0) OR " + (
            f"(job_id IS NOT NULL AND {partition_clause(window, 'job')})"
        )
        where = (
            f"resolution_s = {int(finer)} AND pane_start >= {ts_literal(lo)} "
            f"AND pane_start < {ts_literal(hi)} AND ({own})"
        )
        start = f"to_timestamp(epoch_ms(pane_start) // {res * 1000} * {res})"
        keys = ", ".join(KEYS)
        top_k = str(TOP_K)
        sqls = {
            BUCKETS: f"""SELECT {start} AS pane_start, {res} AS resolution_s, {keys}, bucket,
                                CAST(sum(count) AS BIGINT) AS count
                         FROM {BUCKETS} WHERE {where} GROUP BY ALL""",
            PANES: f"""SELECT {start} AS pane_start, {res} AS resolution_s, {keys},
                              CAST(sum(count) AS BIGINT) AS count, sum(value_sum) AS value_sum,
                              list_slice(list_sort(flatten(list(top)), 'DESC'), 1, {top_k}) AS top,
                              list_slice(list_sort(flatten(list(bottom)), 'ASC'), 1, {top_k})
                                  AS bottom
                       FROM {PANES} WHERE {where} GROUP BY ALL""",
        }
        return {
            name: conn.sql(f"SELECT {_COLUMNS[name]} FROM ({sql})")
            .to_arrow_table()
            .cast(TABLES[name])
            for name, sql in sqls.items()
        }
    finally:
        conn.close()
