"""The layout of roll-up segment files: written in row groups, and brought up to date once when a
roll-up table gains columns.

The usage roll-ups gained `<column>_sum` and `<column>_n` (format 2), then `active_sum` and
`active_n` (format 3; warehouse.read.rollup_merge). Files written before lack them; a DuckDB view over
old and new files together must read them by column name (`union_by_name`, which opens every
file's footer when a query binds: about three times the time of a plain scan over hundreds of
files, and which warehouse.read.reader unions with the empty table so that a column no file has yet is
still there, null). So the roll-up step rewrites every older file once, with the new columns null
(merges and readers read null by the rules of warehouse.read.rollup_merge), in one manifest swap that
also sets the mark `rollups/format`; a reader reads by name only while that mark is not the
current format. This module must never change a row's values, only add null columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import pyarrow as pa
import pyarrow.parquet as pq

from warehouse.storage.segments import Manifest, Segment, SegmentStore

FORMAT_MARK: Final = "rollups/format"
# 2: usage roll-ups keep per-column sums and counts; 3: and the active fraction's sum and count.
FORMAT: Final = "3"

# Rows per Parquet row group of a roll-up file: small enough that a reader's zone maps skip most of
# a day (a job's minutes, a window's edge minutes), big enough to stay a few groups per file.
ROW_GROUP_ROWS: Final = 64 * 1024


def mixed(manifest: Manifest) -> bool:
    """Whether some live roll-up file may predate the current layout (read those by name)."""
    return manifest.marks.get(FORMAT_MARK) != FORMAT


def conform(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """`rows` in `schema`'s layout; a column `rows` lacks is null."""
    columns = [
        rows.column(f.name).cast(f.type)
        if f.name in rows.column_names
        else pa.nulls(rows.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def read_rows(store: SegmentStore, segments: list[Segment], schema: pa.Schema) -> pa.Table:
    """The rows of roll-up `segments`, whatever layout each was written in."""
    parts = [conform(pq.read_table(store.path(s)), schema) for s in segments]
    return pa.concat_tables(parts) if parts else schema.empty_table()


def write_rows(store: SegmentStore, table: str, day: str, seq: int, rows: pa.Table) -> Segment:
    """One sealed (not yet live) roll-up file of `rows`, in row groups of `ROW_GROUP_ROWS`."""
    return store.write_parts(
        store.new_name(table, day, seq),
        rows.schema,
        (
            rows.slice(offset, ROW_GROUP_ROWS)
            for offset in range(0, max(rows.num_rows, 1), ROW_GROUP_ROWS)
        ),
    )


def upgrade(store: SegmentStore, tables: Mapping[str, pa.Schema]) -> int:
    """Rewrite every live roll-up file not in its table's layout; returns how many went live."""
    manifest = store.snapshot()
    if not mixed(manifest):
        return 0
    changes: dict[str, tuple[list[Segment], list[Segment]]] = {}
    for table, schema in tables.items():
        old = [
            s for s in manifest.live(table) if pq.read_schema(store.path(s)).names != schema.names
        ]
        if old:
            new = [
                write_rows(store, table, s.date, s.seq, read_rows(store, [s], schema)) for s in old
            ]
            changes[table] = (old, new)
    if store.swap(changes, marks={FORMAT_MARK: FORMAT}):
        return sum(len(new) for _old, new in changes.values())
    store.discard(s for _old, new in changes.values() for s in new)
    return 0
