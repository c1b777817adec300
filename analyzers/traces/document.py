"""The stored analysis of one trace (catalog `trace_analyses`, by service.py): what the Trace page
draws without analysing the file again. NaN and infinities become null. Never does I/O.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from analyzers.traces.analyses.base import TraceOptions
from analyzers.traces.api import TraceReport
from analyzers.traces.classify import KernelClass
from analyzers.traces.frame import RankFrame
from analyzers.traces.render import analyses_data, json_ready

DOCUMENT_VERSION = 1
# The defaults, with the page's 15 top kernels (the summary keeps the analysis' default 10).
OPTIONS = TraceOptions(top_kernels=15)
TIMELINE_OPS = 5000  # ops kept per rank for the timeline: a chart of more is unreadable anyway


def _timeline(frame: RankFrame) -> dict[str, Any]:
    """The first TIMELINE_OPS ops on a stream in start order, from the first one's start, as
    columns, and how many there are. Names are stored once (`names`, their classes in `kinds`)
    and referenced by index: a few dozen kernels repeat thousands of times."""
    rows = np.flatnonzero(frame.on_stream)
    start = frame.ts[rows]
    origin = float(start.min()) if len(rows) else 0.0
    kept = rows[np.lexsort((frame.stream[rows], start))[:TIMELINE_OPS]]
    # `first`: a row of each name (its class is the name's); `name`: each row's index in `used`
    used, first, name = np.unique(frame.name[kept], return_index=True, return_inverse=True)
    return {
        "total": len(rows),
        "names": [frame.texts[i] for i in used.tolist()],
        "kinds": [KernelClass(int(c)).name.lower() for c in frame.kernel_class[kept[first]]],
        "name": name.tolist(),
        "stream": frame.stream[kept].tolist(),
        "start_us": (frame.ts[kept] - origin).tolist(),
        "dur_us": frame.dur[kept].tolist(),
    }


def analysis_document(report: TraceReport) -> dict[str, Any]:
    trace = report.trace
    document: dict[str, Any] = json_ready(
        {
            "version": DOCUMENT_VERSION,
            "mode": str(trace.mode),
            "ranks": sorted(trace.ranks),
            "notes": list(trace.notes),
            "analyses": analyses_data(report, lambda t: {"columns": t.columns, "rows": t.rows}),
            "findings": [f.to_dict() for f in report.findings],
            "timeline": {rank: _timeline(frame) for rank, frame in trace.ranks.items()},
        },
        finite=True,
    )
    return document
