"""The server plug-in that analyzes every uploaded profiler trace (on-demand profiling, issue 4).

A `fleetscope.server` entry point (selected by `server.plugins`' default `*`; warehouse.ingest.runtime
calls `setup(server)`), it appends an `on_trace_uploaded` hook. For each trace an agent uploads, the hook runs `analyze_trace` once
(every trace analysis and the trace rules T1-T12, under `document.OPTIONS`) and hands the outcome
to `server.profiling.finish`, which stores it and marks the profile request done: the summary
(`trace_summary`, the catalog's `traces.summary`, what the API and `fleetscope profile` show) and
the analysis document (`document.analysis_document`, the catalog's `trace_analyses`, what the
dashboard's Trace page draws without analysing the file again). A trace the analyses cannot read
fails its request with the trace error, word for word.

Runs on the server's profiling worker thread, one trace at a time. Must never import the
analyses at module level (the server imports this module at start), raise into the server, or
write anything itself (the warehouse stores what it is given).
"""

from __future__ import annotations

from typing import Any

# Server plug-in order (fleetscope.plugins): before the closed loop, which reads the summary
# this hook stores.
PLUGIN_ORDER = 20
# Both servers (fleetscope.plugins.server_modes): in fleet mode the gateway an upload lands on
# analyses it (the trace is read from the bucket into that gateway's cache folder); the claim of
# the upload in the catalog makes that one analysis per trace, and if that gateway stops first
# another takes its lapsed lease over and this hook runs there (warehouse.profiling.analysis_leases).
SERVER_MODES = ("embedded", "fleet")


def setup(server: Any) -> None:
    server.on_trace_uploaded.append(analyze_upload)


def analyze_upload(server: Any, upload: Any) -> None:
    """Analyze one stored trace and report the outcome to the server's profiling service."""
    from analyzers.traces.api import analyze_trace
    from analyzers.traces.document import OPTIONS, analysis_document
    from analyzers.traces.summary import summarize
    from fleetscope.errors import TraceError

    try:
        report = analyze_trace(
            server.profiling.storage.local_path(upload.trace_id),
            job_id=upload.job_id,
            options=OPTIONS,
        )
    except TraceError as exc:
        server.profiling.finish(upload, error=f"trace {upload.trace_id}: {exc}")
        return
    summary = summarize(report, trace_id=upload.trace_id, host=upload.host, pid=upload.pid)
    server.profiling.finish(upload, summary=summary, analysis=analysis_document(report))
