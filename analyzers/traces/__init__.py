"""PyTorch profiler (Kineto) trace loading and analyses, HTA-compatible on request.

    from analyzers.traces import analyze_trace
    report = analyze_trace("trace_dir_or_file", hta_compatible=False)
    report.results["temporal_breakdown"].table("temporal_breakdown").records()
    report.findings  # analyzers.findings.Finding, rules T1-T12

Layers: `load` (stream-parse a file into columns) -> `hta_rules` or `native` (prepare a
`TraceSet`) -> `analyses` (one module per analysis, a registry) -> `findings` (rules) ->
`render` / `arrow` (output, storage). See docs/traces.md and shared/trace-semantics.md.
"""

from analyzers.traces.analyses.base import AnalysisResult, Table, TraceOptions
from analyzers.traces.api import (
    TraceReport,
    analyze_trace,
    find_trace_files,
    load_trace_set,
    run_analyses,
)
from analyzers.traces.frame import Mode, RankFrame, TraceSet
from analyzers.traces.load import RawTrace, load_raw_trace

__all__ = [
    "AnalysisResult",
    "Mode",
    "RankFrame",
    "RawTrace",
    "Table",
    "TraceOptions",
    "TraceReport",
    "TraceSet",
    "analyze_trace",
    "find_trace_files",
    "load_raw_trace",
    "load_trace_set",
    "run_analyses",
]
