"""PyTorch profiler (Kineto) trace loading and analyses, HTA-compatible on request.

    from analyzers.traces import analyze_trace
    report = analyze_trace("trace_dir_or_file", hta_compatible=False)
    report.results["temporal_breakdown"].table("temporal_breakdown").records()
    report.findings  # analyzers.findings.Finding, rules T1-T12

Layers: `load` (stream-parse a file into columns) -> `hta_rules` or `native` (prepare a
`TraceSet`) -> `analyses` (one module per analysis, a registry) -> `findings` (rules) ->
`render` / `document` (output, the stored analysis). See docs/traces.md and shared/trace-semantics.md.

The names below load on first use (PEP 562), so importing the package (as `fleetscope trace`'s
registration does) loads no numpy and keeps `fleetscope --help` fast.
"""

import importlib
import typing

if typing.TYPE_CHECKING:
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

_WHERE = {
    "AnalysisResult": "analyzers.traces.analyses.base",
    "Table": "analyzers.traces.analyses.base",
    "TraceOptions": "analyzers.traces.analyses.base",
    "TraceReport": "analyzers.traces.api",
    "analyze_trace": "analyzers.traces.api",
    "find_trace_files": "analyzers.traces.api",
    "load_trace_set": "analyzers.traces.api",
    "run_analyses": "analyzers.traces.api",
    "Mode": "analyzers.traces.frame",
    "RankFrame": "analyzers.traces.frame",
    "TraceSet": "analyzers.traces.frame",
    "RawTrace": "analyzers.traces.load",
    "load_raw_trace": "analyzers.traces.load",
}

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


def __getattr__(name: str) -> object:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
