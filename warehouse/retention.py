"""Retention: raw samples older than `warehouse.raw_retention_days` leave segments and DuckDB.

Whole UTC days go: their raw segments are retired in one manifest swap (deleted after the grace
period) and the writer deletes the same rows, and ledger entries as old, from the telemetry
database on its own thread. Roll-ups are kept. This module must never delete roll-ups.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta

import duckdb
import pyarrow as pa

from fleetscope.contract import TABLES
from warehouse.segments import Segment, SegmentStore
from warehouse.writer import Writer


def expire(
    store: SegmentStore,
    writer: Writer | None,
    keep_days: int,
    today: date,
    tables: Mapping[str, pa.Schema] = TABLES,
) -> int:
    """Drop raw days before `today - keep_days`; returns the number of segments retired."""
    cutoff = today - timedelta(days=keep_days)
    manifest = store.snapshot()
    changes: dict[str, tuple[list[Segment], list[Segment]]] = {}
    for table in tables:
        old = [
            s
            for day, segs in manifest.by_date(table).items()
            if date.fromisoformat(day) < cutoff
            for s in segs
        ]
        if old:
            changes[table] = (old, [])
    if changes:
        store.swap(changes)
    if writer is not None:
        cutoff_ts = datetime(cutoff.year, cutoff.month, cutoff.day, tzinfo=UTC)
        writer.call(lambda conn: _delete_before(conn, cutoff_ts, tables)).result()
    return sum(len(old) for old, _new in changes.values())


def _delete_before(
    conn: duckdb.DuckDBPyConnection, cutoff: datetime, tables: Mapping[str, pa.Schema]
) -> None:
    conn.execute("BEGIN TRANSACTION")
    for table in tables:
        conn.execute(f"DELETE FROM {table} WHERE ts < ?", [cutoff])
    conn.execute("DELETE FROM ingest_batches WHERE received_at < ?", [cutoff])
    conn.execute("DELETE FROM ingest_flushes WHERE committed_at < ?", [cutoff])
    conn.execute("COMMIT")
