"""The server plug-in that analyzes every uploaded trace once and hands `server.profiling.finish`
its summary (summary.py) and analysis document (document.py), or the trace error word for word.
Runs on the server's profiling worker thread. Must never import the analyses at module level (the
server imports this at start), raise into the server, or write anything (the warehouse does).
"""

from __future__ import annotations

from typing import Any

PLUGIN_ORDER = 20  # before the closed loop, which reads the summary this hook stores
# In fleet mode the gateway an upload lands on analyses it; the upload's claim in the catalog
# makes that one analysis per trace (warehouse.profiling.analysis_leases).
SERVER_MODES = ("embedded", "fleet")


def setup(server: Any) -> None:
    server.on_trace_uploaded.append(analyze_upload)


def analyze_upload(server: Any, upload: Any) -> None:
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
