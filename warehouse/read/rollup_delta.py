"""Roll-ups that follow ingest: a day's new raw segments rolled up alone and added as a part of the
day's roll-up tables, instead of the whole day rolled up again.

Why: rolling a whole day up again each time it grows reads all its raw rows (8.7 M for a day of
1,000 GPUs at 10 s) every pass, so a freshly written week had no roll-ups for minutes and every
page fell back to scanning 60 M raw samples (issue 27: past 12 GiB, no answer). Every statistic of
every roll-up table is a count, sum, min or max (warehouse.read.rollups), so the rows of the new samples
alone are rows a reader can add to the stored ones: readers aggregate over a table's rows by key,
never assume one row per key (warehouse.read.rollup_merge, dashboard.health, analyzers.accounting).

What a family's mark `<family>/<day>` = "<seq>:<rows>" says is kept: the day's roll-up parts hold
exactly the raw rows of the live segments with a sequence up to `seq`, `rows` of them. Compaction
names a merged file by its parts' highest sequence, so a merge of parts on both sides of `seq`
would hide rolled rows under a newer sequence: `unrolled` sees the rows at or below `seq` fall
short of `rows` and answers None, and the day is rolled up whole again (the step before this
module existed).

A day's table holds at most `MAX_PARTS` files: the part that would exceed it is merged with the
stored ones into one file by the family's merge SQL, in DuckDB over the files, streamed out in row
groups (never the day's rows in Python at once). This module must never modify raw segments.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import duckdb
import pyarrow as pa

from warehouse.read import rollup_format
from warehouse.storage.segments import Segment, SegmentStore

# Files per roll-up table and day before they are merged into one: readers open every file's
# footer, so keep the count small; each merge re-reads only the day's roll-up rows (1/10 to 1/360
# of its raw rows), never its raw samples.
MAX_PARTS: Final = 8


def unrolled(mark: str | None, raw: list[Segment]) -> list[Segment] | None:
    """The raw segments of a day that its roll-up parts do not hold yet, or None when that cannot
    be told apart (no mark yet, or compaction merged rolled and new rows into one file)."""
    if mark is None or ":" not in mark:
        return None
    seq_text, rows_text = mark.rsplit(":", 1)
    try:
        seq, rows = int(seq_text), int(rows_text)
    except ValueError:
        return None
    if sum(s.rows for s in raw if s.seq <= seq) != rows:
        return None
    return [s for s in raw if s.seq > seq]


def files_sql(store: SegmentStore, segments: list[Segment]) -> str:
    listed = ", ".join("'" + str(store.path(s)).replace("'", "''") + "'" for s in segments)
    return f"read_parquet([{listed}], hive_partitioning = false, union_by_name = true)"


def _batches(result: duckdb.DuckDBPyRelation, schema: pa.Schema) -> Iterator[pa.Table]:
    reader = result.to_arrow_reader(rollup_format.ROW_GROUP_ROWS)
    for batch in reader:
        yield rollup_format.conform(pa.Table.from_batches([batch]), schema)


def add_part(
    conn: duckdb.DuckDBPyConnection,
    store: SegmentStore,
    where: tuple[str, str, int],
    rows: pa.Table,
    current: list[Segment],
    merge_sql: str,
    schema: pa.Schema,
) -> tuple[list[Segment], list[Segment]]:
    """The change that adds `rows` (roll-up rows of new samples) to the day's table: a new part,
    or, past `MAX_PARTS`, one file merging the stored parts with them. `where` is (table, day,
    seq); `merge_sql` reads relations `stored` and `rolled` (warehouse.read.rollups.Family.merge)."""
    table, day, seq = where
    if len(current) + 1 <= MAX_PARTS:
        return [], [rollup_format.write_rows(store, table, day, seq, rows)]
    conn.execute(f"CREATE OR REPLACE TEMP VIEW stored AS SELECT * FROM {files_sql(store, current)}")
    conn.register("rolled", rows)
    try:
        merged = store.write_parts(
            store.new_name(table, day, seq), schema, _batches(conn.sql(merge_sql), schema)
        )
    finally:
        conn.unregister("rolled")
        conn.execute("DROP VIEW stored")
    return current, [merged]
