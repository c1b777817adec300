"""Retention: raw samples older than `warehouse.raw_retention_days` leave segments and DuckDB.

Whole UTC days go: their raw segments are retired in one manifest swap (deleted after the grace
period) and the writer deletes the same rows, and ledger entries as old, from the telemetry
database on its own thread. Roll-ups are kept. A day of gpu_samples goes only once every roll-up
family holds exactly its live segments (`rollups.rolled_up`): a segment published after the
roll-up step waits, raw, for the next pass's roll-up. The swap marks the day retired
(`raw_retired/<day>`), so later raw segments of it are merged into its roll-ups by the roll-up
step, which retires them itself; retention leaves those alone. This module must never delete
roll-ups.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta

import duckdb
import pyarrow as pa

from fleetscope.contract import TABLES
from warehouse.read.rollups import SOURCE_TABLE, input_mark, retired_key, rolled_up
from warehouse.storage.segments import Manifest, Segment, SegmentStore
from warehouse.storage.writer import Writer


def expire(
    store: SegmentStore,
    writer: Writer | None,
    keep_days: int,
    today: date,
    tables: Mapping[str, pa.Schema] = TABLES,
) -> int:
    """Drop raw days before `today - keep_days`; returns the number of segments retired.

    With a writer the pass runs on the writer's thread, between its flushes, and keeps (for this
    pass) every day from the oldest one whose acknowledged rows still sit in the ingest log, not
    yet flushed: expiring such a day would retire its segments and delete its rows while more of
    them are about to land, half a day gone. Nothing is flushed while the pass runs, so what the
    log holds cannot change under it.
    """
    cutoff = today - timedelta(days=keep_days)
    if writer is None:
        return _expire(store, None, _cutoffs(cutoff, {}, tables), cutoff)
    return writer.call(
        lambda conn: _expire(
            store, conn, _cutoffs(cutoff, writer.oldest_unflushed_ts(), tables), cutoff
        )
    ).result()


def _cutoffs(
    cutoff: date, unflushed: Mapping[str, datetime], tables: Mapping[str, pa.Schema]
) -> dict[str, date]:
    """Per table, the first day kept: `cutoff`, or the day of its oldest unflushed row if older."""
    kept: dict[str, date] = {}
    for table in tables:
        oldest = unflushed.get(table)
        day = oldest.astimezone(UTC).date() if oldest is not None else cutoff
        kept[table] = min(cutoff, day)
    return kept


def _expire(
    store: SegmentStore,
    conn: duckdb.DuckDBPyConnection | None,
    cutoffs: Mapping[str, date],
    ledger_cutoff: date,
) -> int:
    manifest = store.snapshot()
    changes: dict[str, tuple[list[Segment], list[Segment]]] = {}
    marks: dict[str, str] = {}
    for table, cutoff in cutoffs.items():
        old: list[Segment] = []
        for day, segs in manifest.by_date(table).items():
            if date.fromisoformat(day) >= cutoff:
                continue
            if table == SOURCE_TABLE:
                if not _covered(manifest, day, segs):
                    continue
                marks[retired_key(day)] = input_mark(segs)
            old.extend(segs)
        if old:
            changes[table] = (old, [])
    if changes:
        store.swap(changes, marks=marks)
    if conn is not None:
        _delete_before(
            conn, {t: _midnight(d) for t, d in cutoffs.items()}, _midnight(ledger_cutoff)
        )
    return sum(len(old) for old, _new in changes.values())


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _covered(manifest: Manifest, day: str, raw: list[Segment]) -> bool:
    """Whether the day's raw segments may go: the roll-ups hold exactly them, and the day was not
    retired before (then they are late ones the roll-up step merges and retires)."""
    return retired_key(day) not in manifest.marks and rolled_up(manifest, day, raw)


def _delete_before(
    conn: duckdb.DuckDBPyConnection, cutoffs: Mapping[str, datetime], ledger_cutoff: datetime
) -> None:
    conn.execute("BEGIN TRANSACTION")
    for table, cutoff in cutoffs.items():
        conn.execute(f"DELETE FROM {table} WHERE ts < ?", [cutoff])
    conn.execute("DELETE FROM ingest_batches WHERE received_at < ?", [ledger_cutoff])
    conn.execute("DELETE FROM ingest_flushes WHERE committed_at < ?", [ledger_cutoff])
    conn.execute("COMMIT")
