"""The one-call entry points: find trace files, load them, run every analysis, derive findings.

`analyze_trace(path)` is what the CLI, the profiling pipeline (a freshly uploaded trace) and the
dashboard call; `load_trace_set` and `run_analyses` are its two halves for callers that need one.
Never prints; never touches the warehouse (`document.analysis_document` is what gets stored).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from analyzers.findings import Finding
from analyzers.traces.analyses import load_registry
from analyzers.traces.analyses.base import AnalysisResult, TraceOptions
from analyzers.traces.frame import TraceSet
from analyzers.traces.hta_rules import prepare_hta
from analyzers.traces.load import RawTrace, load_raw_trace
from analyzers.traces.native import prepare_native
from analyzers.traces.spill import SPILL_OVER_BYTES, SpilledFrames
from analyzers.traces.trace_text import regular_file_size
from fleetscope.errors import TraceError

__all__ = ["TraceReport", "analyze_trace", "find_trace_files", "load_trace_set", "run_analyses"]

TRACE_SUFFIXES = (".json", ".gz")


def find_trace_files(path: str | Path) -> list[Path]:
    """A file, or every `*.json` / `*.gz` file directly in a folder (HTA's discovery), sorted."""
    path = Path(path)
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(TRACE_SUFFIXES))
        if not files:
            raise TraceError(f"{path}: no trace files (*.json, *.gz) in this folder")
        return files
    if not os.path.lexists(path):
        raise TraceError(f"{path}: no such file or folder")
    regular_file_size(path)  # a FIFO, a device, a dangling link: says which
    raise TraceError(f"{path}: cannot read")


def load_trace_set(
    path: str | Path,
    *,
    hta_compatible: bool = False,
    raws: Iterable[RawTrace] | None = None,
    load: Callable[[Path], RawTrace] = load_raw_trace,
    spill_over_bytes: int = SPILL_OVER_BYTES,
) -> TraceSet:
    """Parse a trace file or a folder of per-rank files and prepare it for the analyses.

    `load` reads one file (tests pass a cached or alternative loader). Files are read one at a
    time, each reduced to its rank's frame before the next is read (issue 29), so the loader's
    raw columns add one rank to the peak, not the set. A set of several files larger than
    `spill_over_bytes` together keeps its frames in files, one rank mapped at a time (spill.py),
    so its peak grows with the largest rank, not the set."""
    frames: SpilledFrames | None = None
    if raws is None:
        files = find_trace_files(path)
        if len(files) > 1 and sum(p.stat().st_size for p in files) > spill_over_bytes:
            frames = SpilledFrames()
        raws = (load(p) for p in files)
    return prepare_hta(raws, frames) if hta_compatible else prepare_native(raws, frames)


def run_analyses(
    trace: TraceSet, options: TraceOptions | None = None, names: Iterable[str] | None = None
) -> dict[str, AnalysisResult]:
    """Run the registered analyses (all, or `names`) in report order."""
    options = options or TraceOptions()
    registry = load_registry()
    wanted = list(names) if names is not None else list(registry)
    unknown = sorted(set(wanted) - set(registry))
    if unknown:
        raise TraceError(f"unknown trace analyses {unknown}; known: {sorted(registry)}")
    results: dict[str, AnalysisResult] = {}
    for name in registry:
        if name in wanted:
            results[name] = registry[name].fn(trace, options)
    return results


@dataclass
class TraceReport:
    """Everything `fleetscope trace analyze` prints for one trace set."""

    trace: TraceSet
    options: TraceOptions
    results: dict[str, AnalysisResult]
    findings: list[Finding] = field(default_factory=list)


def analyze_trace(
    path: str | Path,
    *,
    hta_compatible: bool = False,
    options: TraceOptions | None = None,
    job_id: str | None = None,
) -> TraceReport:
    """Load, analyze and judge one trace (file or folder of ranks): the one call a freshly
    uploaded trace needs."""
    from analyzers.traces.findings import trace_findings

    options = options or TraceOptions()
    trace = load_trace_set(path, hta_compatible=hta_compatible)
    results = run_analyses(trace, options)
    findings = trace_findings(trace, results, options, job_id=job_id)
    return TraceReport(trace, options, results, findings)
