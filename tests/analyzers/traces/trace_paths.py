"""Paths of the golden traces (tests/data/traces/<name>/ holds a trace and HTA 0.5.0's results),
a per-session cache of their parsed files so each is read once, and one of them made to hold a
CUDA graph's launch (no trace here records a `cudaGraphLaunch`)."""

from __future__ import annotations

import gzip
import json
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


_MEASURED = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"


def graph_launch(out: Path, *, in_window: bool) -> Path:
    """critical_path_simple_add with its measured forward pass renamed `ProfilerStep#1` (the
    window) and one `cudaLaunchKernel` removed, its kernel given the launch before's
    correlation: one launch of two kernels, as a CUDA graph's launch has (no trace here records
    a `cudaGraphLaunch`), before the window or inside it."""
    src = DATA / "edge_cases" / "critical_path_simple_add" / "critical_path_simple_add.json.gz"
    doc = json.loads(gzip.decompress(src.read_bytes()))
    events = doc["traceEvents"]
    step = next(e for e in events if e.get("name") == _MEASURED)
    for e in events:
        if e.get("name") == _MEASURED:
            e["name"] = "ProfilerStep#1"
    start, end = step["ts"], step["ts"] + step["dur"]
    launches = [
        e
        for e in events
        if e.get("name") == "cudaLaunchKernel" and (start <= e["ts"] <= end) == in_window
    ]
    kept, gone = launches[2]["args"]["correlation"], launches[3]["args"]["correlation"]
    for e in events:
        if e.get("cat") == "kernel" and e["args"]["correlation"] == gone:
            e["args"]["correlation"] = kept
    events.remove(launches[3])
    doc["traceEvents"] = [e for e in events if not (e.get("cat") == "ac2g" and e["id"] == gone)]
    out.mkdir()
    (out / "graph.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    return out
