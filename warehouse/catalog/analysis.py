"""Analyzer bookkeeping: per-partition watermarks and the record of every run.

Watermarks let analyzers resume where the last window ended; windows come from the schedule time,
not now() (design.md), so setting a watermark is an upsert that never moves it backwards. This
module must never decide windows itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Connection, Integer, String, Table, Text, select, update

from fleetscope.errors import NotFoundError
from warehouse.catalog.base import UTCDateTime, metadata, upsert, utcnow

analyzer_watermarks = Table(
    "analyzer_watermarks",
    metadata,
    Column("analyzer", String(128), primary_key=True),
    Column("partition", String(255), primary_key=True),
    Column("watermark_ts", UTCDateTime, nullable=False),
)

analyzer_runs = Table(
    "analyzer_runs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("analyzer", String(128), nullable=False),
    Column("partition", String(255)),
    Column("window_start", UTCDateTime, nullable=False),
    Column("window_end", UTCDateTime, nullable=False),
    Column("state", String(16), nullable=False),  # running | ok | failed
    Column("started_at", UTCDateTime, nullable=False),
    Column("finished_at", UTCDateTime),
    Column("findings", Integer),
    Column("stats", JSON),
    Column("error", Text),
)


@dataclass(frozen=True)
class AnalyzerRun:
    run_id: str
    analyzer: str
    partition: str | None
    window_start: datetime
    window_end: datetime
    state: str
    started_at: datetime
    finished_at: datetime | None
    findings: int | None
    stats: dict[str, Any] | None
    error: str | None


def get_watermark(conn: Connection, analyzer: str, partition: str = "") -> datetime | None:
    row = conn.execute(
        select(analyzer_watermarks.c.watermark_ts).where(
            analyzer_watermarks.c.analyzer == analyzer,
            analyzer_watermarks.c.partition == partition,
        )
    ).first()
    return row[0] if row else None


def set_watermark(conn: Connection, analyzer: str, partition: str, ts: datetime) -> None:
    """Advance the watermark to `ts`; an older `ts` leaves it where it is."""
    row = {"analyzer": analyzer, "partition": partition, "watermark_ts": ts}
    upsert(
        conn, analyzer_watermarks, [row], ["analyzer", "partition"], {"watermark_ts": "greatest"}
    )


def start_run(
    conn: Connection,
    run_id: str,
    analyzer: str,
    window_start: datetime,
    window_end: datetime,
    partition: str | None = None,
) -> None:
    conn.execute(
        analyzer_runs.insert().values(
            run_id=run_id,
            analyzer=analyzer,
            partition=partition,
            window_start=window_start,
            window_end=window_end,
            state="running",
            started_at=utcnow(),
        )
    )


def finish_run(
    conn: Connection,
    run_id: str,
    *,
    findings: int = 0,
    stats: dict[str, Any] | None = None,
    error: str | None = None,
) -> None:
    result = conn.execute(
        update(analyzer_runs)
        .where(analyzer_runs.c.run_id == run_id)
        .values(
            state="failed" if error else "ok",
            finished_at=utcnow(),
            findings=findings,
            stats=stats,
            error=error,
        )
    )
    if result.rowcount == 0:
        raise NotFoundError(f"no analyzer run {run_id!r}")


def list_runs(conn: Connection, analyzer: str | None = None) -> list[AnalyzerRun]:
    query = select(analyzer_runs).order_by(analyzer_runs.c.started_at.desc())
    if analyzer is not None:
        query = query.where(analyzer_runs.c.analyzer == analyzer)
    return [AnalyzerRun(**row) for row in conn.execute(query).mappings()]
