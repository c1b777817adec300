"""The server plug-in that analyzes every uploaded profiler trace (on-demand profiling, issue 4).

In `server.plugins` by default (warehouse.runtime loads it and calls `setup(server)`), it appends
an `on_trace_uploaded` hook. For each trace an agent uploads, the hook runs `analyze_trace` (every
trace analysis and the trace rules T1-T12), stores the summary (`trace_summary`) in the catalog's
`traces.summary` through `server.profiling.finish`, which also marks the profile request done, and
writes the trace's events and kernels as Parquet next to the trace file for SQL (DuckDB reads
`<data_dir>/traces/<trace_id>.trace_events.parquet`). A trace the analyses cannot read fails its
request with the trace error, word for word.

Runs on the server's profiling worker thread, one trace at a time. Must never import the
analyses at module level (the server imports this module at start) or raise into the server.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


# Server plug-in order (fleetscope.plugins): before the closed loop, which reads the summary
# this hook stores.
PLUGIN_ORDER = 20


def setup(server: Any) -> None:
    server.on_trace_uploaded.append(analyze_upload)


def analyze_upload(server: Any, upload: Any) -> None:
    """Analyze one stored trace and report the outcome to the server's profiling service."""
    from analyzers.traces.api import analyze_trace
    from analyzers.traces.summary import summarize
    from fleetscope.errors import TraceError

    try:
        report = analyze_trace(upload.path, job_id=upload.job_id)
    except TraceError as exc:
        server.profiling.finish(upload, error=f"trace {upload.trace_id}: {exc}")
        return
    summary = summarize(report, trace_id=upload.trace_id, host=upload.host, pid=upload.pid)
    try:
        write_tables(report, upload.path)
    except OSError as exc:  # the summary is what the request needs; tables are a convenience
        log.warning("trace %s: Parquet tables not written: %s", upload.trace_id, exc)
    server.profiling.finish(upload, summary=summary)


def write_tables(report: Any, trace_path: Any) -> None:
    import pyarrow.parquet as pq

    from analyzers.traces.arrow import to_arrow_tables

    stem = str(trace_path).removesuffix(".pt.trace.json.gz")
    for name, table in to_arrow_tables(report.trace).items():
        pq.write_table(table, f"{stem}.{name}.parquet", compression="zstd")
