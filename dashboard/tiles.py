"""Which table to read each part of a time window from: coarse roll-ups inside, raw at the edges.

A query whose statistics combine exactly over any split of time (counts, sums, min, max: the
hosts page's health counters) can read a window as disjoint tiles: whole hours from an hourly
roll-up, the minutes around them from a per-minute one, and the rest (before the first whole
minute, and after the newest roll-up bucket) from the raw samples. A roll-up's newest bucket is
never used: the day may have been rolled up while that bucket was still filling
(`warehouse.read.rollups`), so it and everything after it come from the raw samples.

This module plans; it reads only the newest bucket of each roll-up, and must never write.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb


@dataclass(frozen=True)
class Tile:
    """Read `table` for [start_ms, end_ms); `bucket_ms` is 0 for a raw table."""

    table: str
    bucket_ms: int
    start_ms: int
    end_ms: int


def newest_bucket_ms(con: duckdb.DuckDBPyConnection, table: str) -> int | None:
    """Start of a roll-up's newest bucket (epoch ms), None when it is empty or missing."""
    names = {row[0] for row in con.sql("SELECT view_name FROM duckdb_views()").fetchall()}
    names |= {row[0] for row in con.sql("SELECT table_name FROM duckdb_tables()").fetchall()}
    if table not in names:
        return None
    value = con.sql(f"SELECT epoch_ms(max(bucket_ts)) FROM {table}").fetchall()[0][0]
    return None if value is None else int(value)


def plan(
    start_ms: int,
    end_ms: int,
    rollups: Sequence[tuple[str, int, int | None]],
    raw: str,
) -> list[Tile]:
    """Disjoint tiles covering [start_ms, end_ms), in time order.

    `rollups` is (table, bucket ms, newest bucket start ms or None), coarsest first, each bucket
    size a multiple of the next. A roll-up covers the whole buckets inside the range that start
    before its newest bucket; what is left on either side goes to the next finer one, and last
    to `raw`.
    """
    if start_ms >= end_ms:
        return []
    if not rollups:
        return [Tile(raw, 0, start_ms, end_ms)]
    (table, bucket_ms, newest_ms), finer = rollups[0], rollups[1:]
    first = -(-start_ms // bucket_ms) * bucket_ms  # first whole bucket at or after start
    stop = end_ms // bucket_ms * bucket_ms  # buckets starting before this end inside the range
    if newest_ms is not None:
        stop = min(stop, newest_ms)
    if newest_ms is None or first >= stop:
        return plan(start_ms, end_ms, finer, raw)
    return [
        *plan(start_ms, first, finer, raw),
        Tile(table, bucket_ms, first, stop),
        *plan(stop, end_ms, finer, raw),
    ]
