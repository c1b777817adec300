"""Paths of the golden traces (tests/data/traces/<name>/ holds a trace and HTA 0.5.0's results),
and a per-session cache of their parsed files so each is read once."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from analyzers.traces.api import find_trace_files, load_trace_set
from analyzers.traces.frame import TraceSet
from analyzers.traces.load import RawTrace, load_raw_trace

DATA = Path(__file__).resolve().parents[2] / "data" / "traces"
MAIN_TRACES = sorted(p for p in DATA.iterdir() if p.is_dir() and p.name != "edge_cases")
EDGE_TRACES = sorted(p for p in (DATA / "edge_cases").iterdir() if p.is_dir())
ALL_TRACES = MAIN_TRACES + EDGE_TRACES


@cache
def raw_traces(trace_dir: Path) -> tuple[RawTrace, ...]:
    return tuple(load_raw_trace(p) for p in find_trace_files(trace_dir))


def trace_set(trace_dir: Path, *, hta_compatible: bool = False) -> TraceSet:
    """A freshly prepared TraceSet over cached parsed files (preparing never mutates them)."""
    return load_trace_set(trace_dir, hta_compatible=hta_compatible, raws=raw_traces(trace_dir))
