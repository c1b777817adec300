"""The catalog: transactional metadata through SQLAlchemy 2 Core (SQLite WAL or PostgreSQL).

One module per area, all on the MetaData of `base`; open it with `connect(url)` (creates missing
tables) and use the small typed functions of each module inside `engine.begin()`:

    fleet       hosts, jobs, gpu_allocations
    tokens      agent_tokens
    findings    findings, suppressions
    analysis    analyzer_watermarks, analyzer_runs
    arrivals    window_arrivals, window_analysed (arrival-driven scheduling)
    profiling   profile_requests, traces, trace_analyses
    autoprofile auto_profiles (finding -> profile -> refined finding)
    reports     report_runs
    ledger      ingest_ledger (fleet mode: batch ids shared by every gateway)
    staging     ingest_staged_files (fleet mode: data files waiting for the table's committer)
    agents      agent_polls (fleet mode: the profiling registry shared by every gateway)
    notifications notifications_sent (a finding notified at most once per channel and severity)
    plans       stored_plans (the scheduled pass's newest sharing plan per window length)

This package must never hold telemetry samples (those are in DuckDB and Parquet).
"""

from __future__ import annotations

from warehouse.catalog import (
    agents,
    analysis,
    arrivals,
    autoprofile,
    findings,
    fleet,
    ledger,
    notifications,
    plans,
    profiling,
    reports,
    staging,
    tokens,
)
from warehouse.catalog.base import connect, metadata

__all__ = [
    "agents",
    "analysis",
    "arrivals",
    "autoprofile",
    "connect",
    "findings",
    "fleet",
    "ledger",
    "metadata",
    "notifications",
    "plans",
    "profiling",
    "reports",
    "staging",
    "tokens",
]
