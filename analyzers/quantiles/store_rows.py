"""The sketch store's rows and how one window's are built: the tier tables' schemas, which panes a
`keep` builds per tier (from the partition's mark, within retention), the pane-building SQL, and
which stored rows a rebuild replaces. Shared by both stores (`analyzers.quantiles.store`): the
local Parquet one (`tiers`) and the fleet's Iceberg one (`fleet_store`), so they keep the same
panes from the same samples and marks.

This module must never write files nor read a store: rows in, rows out.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc

from analyzers.accounting.frames import (
    partition_clause,
    partition_of,
    table_exists,
    ts_literal,
)
from analyzers.quantiles.panes import (
    BUCKET_SCHEMA,
    METRICS,
    PANE_SCHEMA,
    arrow,
    build,
    grouped,
    values_sql,
)
from analyzers.run.clock import align_down
from analyzers.run.parts import WHOLE, Scope, Whole
from fleetscope.errors import ConfigError

if TYPE_CHECKING:
    import duckdb

    from analyzers.base import JobCatalog
    from analyzers.run.window import Window
    from fleetscope.settings import Settings

PANES = "sketch_panes"
BUCKETS = "sketch_buckets"
BUILT = "sketch_built"  # per tier, the time up to which every part has built it (`built_table`)
ROLLUPS = (60, 3600)  # the 1 min and 1 h
KEYS = ("metric", "cluster", "team", "job_id", "host", "gpu_index")
# The most values (samples times their table's metrics) one `tier_rows` build takes when it
# builds several slices at once (`built_slices`): about an hour of a default host slice (128 GPUs
# at 10 s: 322,560 GPU values) with its hosts' and steps', so at the scale host slices are for, a
# build is still one slice's; below it, one build instead of one per slice and host slice.
BATCH_VALUES = 500_000


def _store_schema(schema: pa.Schema) -> pa.Schema:
    fields = list(schema)
    fields.insert(1, pa.field("resolution_s", pa.int32()))
    fields.insert(4, pa.field("team", pa.string()))
    return pa.schema(fields)


TABLES: Mapping[str, pa.Schema] = {
    PANES: _store_schema(PANE_SCHEMA),
    BUCKETS: _store_schema(BUCKET_SCHEMA),
}
COLUMNS = {name: ", ".join(schema.names) for name, schema in TABLES.items()}


@dataclass(frozen=True, slots=True)
class Kept:
    """What one `keep` call stored: rows per resolution, and where the partition's marks are."""

    rows: dict[int, int]
    marks: dict[int, datetime]


@dataclass(frozen=True, slots=True)
class Span:
    """The panes of one tier a `keep` builds: [start, end), and whether they replace stored rows
    (a window at or behind the mark) or add past the mark."""

    start: datetime
    end: datetime
    rebuild: bool

    def slices(self, res: int) -> Iterator[tuple[datetime, datetime]]:
        """[start, end) an hour at a time (the hour tier: a day), so memory is bounded by one
        slice and no slice spans two UTC days."""
        slice_s = slice_seconds(res)
        at = self.start
        while at < self.end:
            stop = min(self.end, align_down(at, slice_s) + timedelta(seconds=slice_s))
            yield at, stop
            at = stop


def slice_seconds(res: int) -> int:
    """How much of tier `res` one build takes: an hour, a day for the hour tier."""
    return 86400 if res >= 3600 else 3600


def filled_slices(
    conn: duckdb.DuckDBPyConnection, window: Window, res: int, todo: Span
) -> dict[int, dict[str, int]]:
    """The slices of `todo` (numbered `epoch_s // slice_seconds(res)`) that hold a row of a
    sketched table for the window's partition, each with, per host, at most how many values it
    sketches (its rows times its table's metrics), in one query: `tier_rows` of any other slice
    is empty, so `keep` skips it and its cost follows the data, not the window's length, and the
    counts let `built_slices` put several slices in one build. A slice found here may still build
    nothing (all its values NULL or not finite): it is built."""
    if todo.start >= todo.end:
        return {}
    slice_ms = slice_seconds(res) * 1000
    mine = "" if window.partition == 0 else " AND job_id IS NOT NULL"
    per_table: dict[str, int] = {}
    for m in METRICS.values():
        per_table[m.table] = per_table.get(m.table, 0) + 1
    parts = [
        f"""SELECT CAST(epoch_ms(ts) // {slice_ms} AS BIGINT) AS slice, host,
                   count(*) * {n} AS n FROM {table}
            WHERE ts >= {ts_literal(todo.start)} AND ts < {ts_literal(todo.end)}
              AND (job_id IS NULL OR {partition_clause(window, "job")}){mine}
            GROUP BY ALL"""
        for table, n in sorted(per_table.items())
        if table_exists(conn, table)
    ]
    if not parts:
        return {}
    found = arrow(
        conn,
        f"SELECT slice, host, CAST(sum(n) AS BIGINT) AS n FROM ({' UNION ALL '.join(parts)})"
        " GROUP BY ALL",
    )
    filled: dict[int, dict[str, int]] = {}
    for s, host, n in zip(
        *(found.column(c).to_pylist() for c in ("slice", "host", "n")), strict=True
    ):
        filled.setdefault(int(s), {})[str(host)] = int(n)
    return filled


def built_slices(
    conn: duckdb.DuckDBPyConnection,
    window: Window,
    catalog: JobCatalog,
    res: int,
    todo: Span,
    hosts: Sequence[Sequence[str]] = (),
) -> Iterator[tuple[datetime, datetime, dict[str, pa.Table] | None]]:
    """Each slice of `todo` in order with its `tier_rows`, None for one that holds no row
    (`filled_slices`, one query).

    Slices that hold rows are built several at a time: a run of them (empty ones between are
    skipped) in one `tier_rows` while their values stay within `BATCH_VALUES`, and the build
    cut into its slices by pane start. A pane lies inside one slice (slices start and end on the
    tier's panes) and is built from its own samples only, so every slice gets the rows of its own
    build (a minute or hour pane's `value_sum` to DuckDB's summation order, which already varies
    with its threads: bench/RESULTS.md, "The sketch keep in fewer, larger builds"). What a build
    costs here is mostly per query (3 to 5 scans of the telemetry views whatever their size), so
    a small fleet's day takes one build instead of 24. A window read
    in host slices packs them the same way: consecutive host slices share a cursor while the
    build stays within the cap. A slice (of hosts, of time) above the cap is built alone, as
    before: memory stays bounded by the larger of the cap and one slice."""
    filled = filled_slices(conn, window, res, todo)
    slice_s = slice_seconds(res)
    ready: dict[datetime, dict[str, pa.Table]] = {}
    pending = [(at, stop) for at, stop in todo.slices(res) if _number(at, slice_s) in filled]
    for at, stop in todo.slices(res):
        if _number(at, slice_s) not in filled:
            yield at, stop, None
            continue
        if at not in ready:
            batch = _batch(pending, filled, slice_s)
            pending = pending[len(batch) :]
            groups = _host_groups(hosts, batch, filled, slice_s)
            if hosts and not groups:  # the rows are of hosts no slice holds: each build is empty
                tables = {name: schema.empty_table() for name, schema in TABLES.items()}
            else:
                tables = tier_rows(conn, window, catalog, res, batch[0][0], batch[-1][1], groups)
            for start, end in batch:
                ready[start] = {name: _between(t, start, end) for name, t in tables.items()}
        yield at, stop, ready.pop(at)


def _number(at: datetime, slice_s: int) -> int:
    return int(at.timestamp()) // slice_s


def _batch(
    pending: list[tuple[datetime, datetime]], filled: Mapping[int, Mapping[str, int]], slice_s: int
) -> list[tuple[datetime, datetime]]:
    """The first slices of `pending` that one build takes: the first, and each next one while
    the sum of their values stays within `BATCH_VALUES`."""
    batch = pending[:1]
    total = sum(filled[_number(pending[0][0], slice_s)].values())
    for at, stop in pending[1:]:
        size = sum(filled[_number(at, slice_s)].values())
        if total + size > BATCH_VALUES:
            break
        batch.append((at, stop))
        total += size
    return batch


def _host_groups(
    hosts: Sequence[Sequence[str]],
    batch: Sequence[tuple[datetime, datetime]],
    filled: Mapping[int, Mapping[str, int]],
    slice_s: int,
) -> list[list[str]]:
    """The host slices joined, in order, into groups whose values in `batch` stay within
    `BATCH_VALUES` (a slice above it is a group of its own); slices without a value in the batch
    are left out (their build is empty)."""
    counts = [filled[_number(at, slice_s)] for at, _stop in batch]
    groups: list[list[str]] = []
    size = 0
    for members in hosts:
        weight = sum(c.get(h, 0) for c in counts for h in members)
        if not weight:
            continue
        if not groups or size + weight > BATCH_VALUES:
            groups.append([])
            size = 0
        groups[-1].extend(members)
        size += weight
    return groups


def _between(table: pa.Table, start: datetime, end: datetime) -> pa.Table:
    """The rows of panes that start in [start, end)."""
    ts = table.column("pane_start")
    inside = pc.and_(
        pc.greater_equal(ts, pa.scalar(start, ts.type)), pc.less(ts, pa.scalar(end, ts.type))
    )
    return table.filter(inside)


def tiers_of(pane_s: int) -> tuple[int, ...]:
    if pane_s <= 0 or pane_s >= 60 or 60 % pane_s:
        raise ConfigError(f"analyzers.sketch_pane_s must divide 60 and be below it: {pane_s}")
    return (pane_s, *ROLLUPS)


def retention_of(settings: Settings) -> dict[int, float | None]:
    """How long each tier is kept (None: forever), from the settings."""
    pane_s = settings.analyzers.sketch_pane_s
    keep = {
        pane_s: settings.analyzers.sketch_pane_retention_s,
        60: settings.analyzers.sketch_minute_retention_s,
        3600: settings.analyzers.sketch_hour_retention_s,
    }
    return {res: (s if s > 0 else None) for res, s in keep.items()}


def tier_table(name: str, resolution_s: int) -> str:
    """The store table of one resolution: tiers live in their own files so that each can have
    its own retention (whole days are dropped)."""
    return f"{name}_{resolution_s}s"


def span(
    window: Window, res: int, mark: datetime | None, keep_s: float | None, now_s: float
) -> Span:
    """What a window builds of tier `res`, its partition's mark at `mark`.

    A window ending at or behind the mark re-runs time already built (late data: a replayed
    spool, an import, an out-of-order window, a backfill): its range is built again and replaces
    what is stored. The clock's window always ends past the mark (its end advances every tick),
    so it only adds the panes after it. Panes older than the tier's retention (`keep_s` back from
    `now_s`, the newest sample) are not built."""
    end = align_down(window.end, res)
    rebuild = mark is not None and window.end <= mark
    start = align_down(window.start, res) if rebuild or mark is None else mark
    if keep_s is not None:
        start = max(start, align_down(utc(now_s - keep_s), res))
    return Span(start, end, rebuild)


def part_key(window: Window, cluster: Scope = WHOLE) -> str:
    """The marks' key of a window's partition (and cluster): `p/n`, `p/n@cluster`."""
    return f"{window.partition}/{window.partitions}{scope_key(cluster)}"


def scope_key(cluster: Scope) -> str:
    """The marks' key suffix of a cluster's builds: quoted, so a `/` in a name cannot reach
    into another key, and `@` so no key is a prefix of the whole partition's."""
    if isinstance(cluster, Whole):
        return ""
    return "@" + ("%" if cluster is None else quote(cluster, safe=""))  # quote never ends in %


def marks_in(
    stored: Mapping[str, str], prefix: str, window: Window, cluster: Scope
) -> dict[int, datetime]:
    """The partition's marks per resolution from `stored` (key `<prefix><part>/<res>s`, value
    ISO): a tier a cluster's part has not built yet goes on from its slice's mark, which covered
    every cluster (a store kept before fleet mode cut windows per cluster)."""

    def of(part: str) -> dict[int, datetime]:
        head = f"{prefix}{part}/"
        return {
            int(key.removeprefix(head).removesuffix("s")): datetime.fromisoformat(value)
            for key, value in stored.items()
            if key.startswith(head)
        }

    return {**of(part_key(window)), **of(part_key(window, cluster))}


def built_table(stored: Mapping[str, str], prefix: str) -> pa.Table:
    """Per tier (resolution_s), the earliest of the parts' marks (keys `<prefix><part>/<res>s`,
    values ISO): up to there every part has built that tier, so a unit before it that holds a
    row of the tier holds one for every key with samples in it (`reading.read_spans`). A cluster's
    part without a mark of its own goes on from its slice's (`marks_in`); a tier that some part
    has no mark for at all is left out (that part may hold finer rows anywhere), and a part that
    stopped building holds its tiers back: more finer rows are read, never fewer."""
    parts: dict[str, dict[int, datetime]] = {}
    for key, value in stored.items():
        part, _, tier = key.removeprefix(prefix).rpartition("/")
        if not key.startswith(prefix) or not part or not tier.endswith("s"):
            continue
        try:
            parts.setdefault(part, {})[int(tier.removesuffix("s"))] = datetime.fromisoformat(value)
        except ValueError:
            continue
    earliest: dict[int, datetime] = {}
    for res in sorted({res for marks in parts.values() for res in marks}):
        found = [
            marks.get(res) or parts.get(part.split("@")[0], {}).get(res)
            for part, marks in parts.items()
        ]
        if all(at is not None for at in found):
            earliest[res] = min(at for at in found if at is not None)
    return pa.table(
        {
            "resolution_s": pa.array(list(earliest), pa.int32()),
            "built_until": pa.array(list(earliest.values()), pa.timestamp("ms", tz="UTC")),
        }
    )


def attach_built(conn: duckdb.DuckDBPyConnection, stored: Mapping[str, str], prefix: str) -> None:
    """(Re)define the temp table BUILT on `conn` from a store's marks (`built_table`)."""
    conn.register("_fs_sketch_built", built_table(stored, prefix))
    try:
        conn.execute(f"CREATE OR REPLACE TEMP TABLE {BUILT} AS SELECT * FROM _fs_sketch_built")
    finally:
        conn.unregister("_fs_sketch_built")


def without(
    table: pa.Table,
    window: Window,
    start: datetime,
    end: datetime,
    cluster: Scope = WHOLE,
) -> pa.Table:
    """Stored rows minus the window's partition's rows of [start, end) (rows without a job
    belong to partition 0, as `tier_rows` keeps them), of `cluster` only when one."""
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


def newest_sample_s(conn: duckdb.DuckDBPyConnection, window: Window) -> float | None:
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


def utc(epoch_s: float) -> datetime:
    return datetime.fromtimestamp(epoch_s, UTC)


def _team_table(jobs: pa.Array, catalog: JobCatalog) -> pa.Table:
    names = [str(j) for j in pc.unique(jobs).drop_null().to_pylist()]
    teams = []
    for job in names:
        info = catalog.get(job)
        teams.append(info.team if info else None)
    return pa.table({"job_id": pa.array(names, pa.string()), "team": pa.array(teams, pa.string())})


def tier_rows(
    conn: duckdb.DuckDBPyConnection,
    window: Window,
    catalog: JobCatalog,
    res: int,
    start: datetime,
    end: datetime,
    hosts: Sequence[Sequence[str]] = (),
) -> dict[str, pa.Table]:
    """The `res`-second panes of [start, end) of the window's partition with their team; rows
    without a job are kept by partition 0 only. With `hosts` (a window read in host slices,
    analyzers.run.slices), each slice's panes are built on its own cursor and concatenated:
    every pane's key holds its host, so they are the panes of one build over all, while DuckDB's
    working set follows a slice, not the fleet (issue 27)."""
    if not hosts:
        return _tier_rows(conn, window, catalog, res, start, end)
    from analyzers.run.slices import slice_cursor

    built: list[dict[str, pa.Table]] = []
    for members in hosts:
        cursor = slice_cursor(conn, members)
        try:
            built.append(_tier_rows(cursor, window, catalog, res, start, end))
        finally:
            cursor.close()
    return {name: pa.concat_tables([b[name] for b in built]) for name in built[0]}


def _tier_rows(
    conn: duckdb.DuckDBPyConnection,
    window: Window,
    catalog: JobCatalog,
    res: int,
    start: datetime,
    end: datetime,
) -> dict[str, pa.Table]:
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
            select = COLUMNS[name].replace("resolution_s", f"{int(res)} AS resolution_s")
            out[name] = arrow(
                conn, f"SELECT {select} FROM _fs_tier_rows LEFT JOIN _fs_teams USING (job_id)"
            ).cast(TABLES[name])
            conn.unregister("_fs_tier_rows")
        return out
    finally:
        conn.unregister("_fs_teams")
