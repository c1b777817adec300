"""Stored plans: the newest document the scheduled analyzer pass computed per plan kind and window
length (the sharing plan over the last 7 days, issue 31), so a page reads it instead of computing it.

One row per (kind, window length): a newer plan replaces the row, an older one (a backfill of a
past bucket) never does, so the row is always the newest window the pass planned. A catalog from
before this table gets it from `connect` (`metadata.create_all`, the catalog's migration); a
reader on an engine that did not create it sees no stored plan. This module must never compute a
plan, nor know what the document holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Connection, Float, String, Table, select

from warehouse.catalog.base import UTCDateTime, metadata, upsert, utcnow

stored_plans = Table(
    "stored_plans",
    metadata,
    Column("kind", String(32), primary_key=True),  # "sharing": `fleetscope plan sharing`
    Column("window_s", Float, primary_key=True),  # the nominal length asked for (7 days)
    Column("window_start", UTCDateTime, nullable=False),
    Column("window_end", UTCDateTime, nullable=False),
    Column("computed_at", UTCDateTime, nullable=False),
    Column("document", JSON, nullable=False),
)


@dataclass(frozen=True)
class StoredPlan:
    kind: str
    window_s: float
    window_start: datetime
    window_end: datetime
    computed_at: datetime
    document: dict[str, Any]


def newest_plan(conn: Connection, kind: str, window_s: float) -> StoredPlan | None:
    """The stored plan of `kind` over windows of `window_s` seconds; None when none was stored."""
    query = select(stored_plans).where(
        stored_plans.c.kind == kind, stored_plans.c.window_s == window_s
    )
    row = conn.execute(query).mappings().first()
    return StoredPlan(**row) if row is not None else None


def record_plan(
    conn: Connection,
    kind: str,
    window_s: float,
    start: datetime,
    end: datetime,
    document: dict[str, Any],
) -> bool:
    """Store the plan of [start, end) unless a plan of a later window is stored; whether it was.
    (Two writers racing may both read the older row: the later commit wins, a plan at most one
    step older, replaced at the next step.)"""
    stored = newest_plan(conn, kind, window_s)
    if stored is not None and stored.window_end >= end:
        return False
    row = {
        "kind": kind,
        "window_s": window_s,
        "window_start": start,
        "window_end": end,
        "computed_at": utcnow(),
        "document": document,
    }
    merge = {c: "replace" for c in ("window_start", "window_end", "computed_at", "document")}
    upsert(conn, stored_plans, [row], ["kind", "window_s"], merge)  # type: ignore[arg-type]
    return True
