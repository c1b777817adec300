"""The stored analysis of one trace: what the Trace page draws, built once when the trace arrives.

`analysis_document(report)` turns a `TraceReport` into one JSON-ready document: the trace's mode,
ranks and notes, every analysis's tables (columns and rows, per-launch detail tables left out as
in `render.report_to_dict`), per-rank numbers and notes, the findings (`Finding.to_dict`), and per
rank the first TIMELINE_OPS GPU ops for the timeline. The upload hook (`analyzers.traces.service`)
stores it in the catalog (`trace_analyses`) next to the summary, so the dashboard lays out the
stored document instead of parsing and analysing the file again; only the HTA-compatible toggle
builds a fresh one. NaN becomes null. Never does I/O, never computes an analysis itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from analyzers.traces.analyses.base import Table, TraceOptions
from analyzers.traces.api import TraceReport
from analyzers.traces.classify import KernelClass
from analyzers.traces.frame import RankFrame
from analyzers.traces.render import is_detail, json_ready

__all__ = ["DOCUMENT_VERSION", "OPTIONS", "TIMELINE_OPS", "analysis_document"]

DOCUMENT_VERSION = 1
# The options the stored analysis runs under: the defaults, with the page's 15 top kernels
# (the analysis' own default is 10; the summary's readers take the first rows they need).
OPTIONS = TraceOptions(top_kernels=15)
TIMELINE_OPS = 5000  # ops kept per rank for the timeline: a chart of more is unreadable anyway


def _table(table: Table) -> dict[str, Any]:
    return {"columns": list(table.columns), "rows": [list(row) for row in table.rows]}


def _timeline(frame: RankFrame) -> dict[str, Any]:
    """The rows the temporal breakdown counts (every op on a stream), from its first op's start,
    in start order: the first TIMELINE_OPS as columns, and how many there are. Names are stored
    once (`names`, with their kernel class in `kinds`) and referenced by index: a few dozen kernels repeat thousands of times."""
    rows = np.flatnonzero(frame.on_stream)
    start = frame.ts[rows]
    origin = float(start.min()) if len(rows) else 0.0
    order = np.lexsort((frame.stream[rows], start))[:TIMELINE_OPS]
    kept = rows[order]
    used, name = np.unique(frame.name[kept], return_inverse=True)
    first = np.unique(name, return_index=True)[1]  # a row of each name: its class is the name's
    return {
        "total": len(rows),
        "names": [frame.names[i] for i in used.tolist()],
        "kinds": [KernelClass(int(c)).name.lower() for c in frame.kernel_class[kept[first]]],
        "name": name.tolist(),
        "stream": frame.stream[kept].tolist(),
        "start_us": (frame.ts[kept] - origin).tolist(),
        "dur_us": frame.dur[kept].tolist(),
    }


def analysis_document(report: TraceReport) -> dict[str, Any]:
    trace = report.trace
    analyses = {
        name: {
            "tables": {t.name: _table(t) for t in result.tables if not is_detail(t)},
            "per_rank": result.per_rank,
            "notes": list(result.notes),
        }
        for name, result in report.results.items()
    }
    document: dict[str, Any] = json_ready(
        {
            "version": DOCUMENT_VERSION,
            "mode": str(trace.mode),
            "ranks": sorted(trace.ranks),
            "notes": list(trace.notes),
            "analyses": analyses,
            "findings": [f.to_dict() for f in report.findings],
            "timeline": {rank: _timeline(frame) for rank, frame in trace.ranks.items()},
        },
        finite=True,
    )
    return document
