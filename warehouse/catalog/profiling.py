"""On-demand profiling requests and the traces they produce.

A request asks the agent on `host` to make ranks of `job_id` record `steps` steps (or
`duration_s` seconds) with the PyTorch profiler; the agent marks it matched/running/done and the
uploaded trace is recorded in `traces`. States: pending -> running -> done | failed | expired.
A trace's analysis is stored once, when it arrives: the small summary (`traces.summary`, what the
API answers) and the whole document the dashboard draws (`trace_analyses`, one row per trace, read
one at a time so that listing traces never loads them). This module must never read or parse a
trace file, nor know what the documents hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Connection, Float, Integer, String, Table, Text, select, update

from fleetscope.errors import NotFoundError
from warehouse.catalog.base import UTCDateTime, metadata, rows_where, upsert, utcnow

profile_requests = Table(
    "profile_requests",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("job_id", String(255), nullable=False, index=True),
    Column("rank", Integer),
    Column("steps", Integer),
    Column("duration_s", Float),
    Column("state", String(16), nullable=False),
    Column("host", String(255)),
    Column("matched", JSON),
    Column("trace_id", String(255)),
    Column("error", Text),
    Column("created", UTCDateTime, nullable=False),
    Column("updated", UTCDateTime, nullable=False),
)

traces = Table(
    "traces",
    metadata,
    Column("trace_id", String(255), primary_key=True),
    Column("job_id", String(255), index=True),
    Column("host", String(255)),
    Column("rank", Integer),
    Column("path", Text, nullable=False),
    Column("uploaded_at", UTCDateTime, nullable=False),
    Column("summary", JSON),
)

trace_analyses = Table(
    "trace_analyses",
    metadata,
    Column("trace_id", String(255), primary_key=True),
    Column("stored_at", UTCDateTime, nullable=False),
    Column("document", JSON, nullable=False),
)


@dataclass(frozen=True)
class ProfileRequest:
    id: int
    job_id: str
    rank: int | None
    steps: int | None
    duration_s: float | None
    state: str
    host: str | None
    matched: Any
    trace_id: str | None
    error: str | None
    created: datetime
    updated: datetime


@dataclass(frozen=True)
class Trace:
    trace_id: str
    job_id: str | None
    host: str | None
    rank: int | None
    path: str
    uploaded_at: datetime
    summary: dict[str, Any] | None


def create_profile_request(
    conn: Connection,
    job_id: str,
    *,
    rank: int | None = None,
    steps: int | None = None,
    duration_s: float | None = None,
    host: str | None = None,
) -> int:
    now = utcnow()
    result = conn.execute(
        profile_requests.insert().values(
            job_id=job_id,
            rank=rank,
            steps=steps,
            duration_s=duration_s,
            host=host,
            state="pending",
            created=now,
            updated=now,
        )
    )
    key = result.inserted_primary_key
    assert key is not None
    return int(key[0])


def update_profile_request(
    conn: Connection, request_id: int, *, touch: bool = True, **changes: Any
) -> None:
    """Change state, matched, trace_id, error or host of a request. `touch=False` leaves `updated`
    (what the run timeout judges progress by) as it was: a renewed analysis lease is no progress."""
    allowed = {"state", "matched", "trace_id", "error", "host"}
    unknown = set(changes) - allowed
    if unknown:
        raise ValueError(f"cannot update {sorted(unknown)} of a profile request")
    result = conn.execute(
        update(profile_requests)
        .where(profile_requests.c.id == request_id)
        .values(**changes, **({"updated": utcnow()} if touch else {}))
    )
    if result.rowcount == 0:
        raise NotFoundError(f"no profile request {request_id}")


def list_profile_requests(
    conn: Connection, *, state: str | None = None, host: str | None = None
) -> list[ProfileRequest]:
    rows = rows_where(conn, profile_requests, state=state, host=host)
    return [ProfileRequest(**row) for row in rows]


def record_trace(conn: Connection, trace: Trace) -> None:
    row = {c.name: getattr(trace, c.name) for c in traces.columns}
    merge = {c: "replace" for c in ("job_id", "host", "rank", "path", "uploaded_at", "summary")}
    upsert(conn, traces, [row], ["trace_id"], merge)  # type: ignore[arg-type]


def get_trace(conn: Connection, trace_id: str) -> Trace:
    row = conn.execute(select(traces).where(traces.c.trace_id == trace_id)).mappings().first()
    if row is None:
        raise NotFoundError(f"no trace {trace_id!r}")
    return Trace(**row)


def record_trace_analysis(conn: Connection, trace_id: str, document: dict[str, Any]) -> None:
    """Store (or replace) the analysis document of `trace_id`."""
    row = {"trace_id": trace_id, "stored_at": utcnow(), "document": document}
    upsert(
        conn, trace_analyses, [row], ["trace_id"], {"stored_at": "replace", "document": "replace"}
    )


def get_trace_analysis(conn: Connection, trace_id: str) -> dict[str, Any] | None:
    """The stored analysis document of `trace_id`; None when none was stored (not analyzed yet,
    analysis failed or not run on this server, or a trace dropped in the folder by hand)."""
    query = select(trace_analyses.c.document).where(trace_analyses.c.trace_id == trace_id)
    document = conn.execute(query).scalar()
    return dict(document) if document is not None else None
