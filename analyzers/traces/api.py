"""The one-call entry points: `analyze_trace(path)` (what the CLI, the upload hook and the
dashboard call) and its two halves, `load_trace_set` and `run_analyses`. Never prints.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any

from analyzers.findings import Finding
from analyzers.traces.analyses import load_registry
from analyzers.traces.analyses.base import AnalysisResult, TraceOptions
from analyzers.traces.frame import TraceSet
from analyzers.traces.hta_rules import hta_rank_frame, prepare_hta
from analyzers.traces.load import RawTrace, load_raw_trace
from analyzers.traces.native import native_rank_frame, prepare_native
from analyzers.traces.spill import SPILL_OVER_BYTES, SpilledFrames
from analyzers.traces.trace_text import regular_file_size
from fleetscope.errors import TraceError

__all__ = [
    "TraceReport",
    "analyze_trace",
    "find_trace_files",
    "load_trace_set",
    "run_analyses",
    "selected_analyses",
]


def find_trace_files(path: str | Path) -> list[Path]:
    """A file, or every `*.json` / `*.gz` file directly in a folder (HTA's discovery), sorted."""
    path = Path(path)
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(
            p for p in path.iterdir() if p.is_file() and p.name.endswith((".json", ".gz"))
        )
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
    rank_workers: int = 1,
) -> TraceSet:
    """Parse a trace file or a folder of per-rank files and prepare it for the analyses. Each
    file becomes its rank's frame before the next is read (the raw columns add one rank to the
    peak). Several files of over `spill_over_bytes` keep their frames in files (spill.py); with
    `rank_workers` > 1 (0: one per CPU) and over `WORKERS_OVER_BYTES`, processes read them."""
    rank_frame = hta_rank_frame if hta_compatible else native_rank_frame
    prepare = prepare_hta if hta_compatible else prepare_native
    if raws is not None:
        return prepare(rank_frame(raw) for raw in raws)
    files = find_trace_files(path)
    set_bytes = sum(p.stat().st_size for p in files)
    frames = SpilledFrames() if len(files) > 1 and set_bytes > spill_over_bytes else None
    workers = min(rank_workers or os.cpu_count() or 1, len(files))
    if workers < 2 or set_bytes <= WORKERS_OVER_BYTES:
        return prepare((rank_frame(load(p)) for p in files), frames)
    from concurrent.futures import ProcessPoolExecutor  # only here, as in run_analyses

    with ProcessPoolExecutor(workers) as pool:
        return prepare(pool.map(_load_rank_frame, files, repeat(rank_frame), repeat(load)), frames)


# Below this, the workers' raw ranks and pickled frames in flight cost more memory than they
# save time (200 MB 8-rank set: PSS 126 -> 167 MiB, against HTA's 469).
WORKERS_OVER_BYTES = SPILL_OVER_BYTES
WORKERS_OVER_ROWS = 1_000_000  # smaller sets: a process start costs more than it saves
# Analyses that share what one of them computes per rank (frame.memo) run in one process.
_TOGETHER = (("critical_path", "whatif"),)


def _load_rank_frame(path: Path, rank_frame: Callable[[RawTrace], Any], load: Any) -> Any:
    return rank_frame(load(path))


def run_analyses(
    trace: TraceSet,
    options: TraceOptions | None = None,
    names: Iterable[str] | None = None,
    workers: int = 1,
) -> dict[str, AnalysisResult]:
    """The analyses (all, or `names`) in report order; with `workers` > 1 (0: one per CPU) and
    over `WORKERS_OVER_ROWS` events, forked processes run them (a group sharing work together)."""
    options = options or TraceOptions()
    registry = load_registry()
    todo = selected_analyses(names)
    groups = [[n for n in group if n in todo] for group in _TOGETHER]
    groups = [g for g in groups if g] + [[n] for n in todo if not any(n in g for g in groups)]
    workers = min(workers or os.cpu_count() or 1, len(groups))
    if workers < 2 or sum(len(f) for f in trace.frames()) <= WORKERS_OVER_ROWS:
        return {name: registry[name].fn(trace, options) for name in todo}
    import multiprocessing  # only here: it imports logging (~10 ms of every small command)
    from concurrent.futures import ProcessPoolExecutor

    # Forked, the workers share the set's pages as they are (nothing is pickled to them).
    fork = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(workers, fork, _WORKER_SET.append, ((trace, options),)) as pool:
        found = {k: v for part in pool.map(_run_group, groups) for k, v in part.items()}
    return {name: found[name] for name in todo}


def selected_analyses(names: Iterable[str] | None) -> list[str]:
    """`names` (all when None) in report order; an unknown one is refused before a set is read."""
    registry = load_registry()
    wanted = list(registry) if names is None else list(names)
    unknown = sorted(set(wanted) - set(registry))
    if unknown:
        raise TraceError(f"unknown trace analyses {unknown}; known: {sorted(registry)}")
    return [name for name in registry if name in wanted]


# A forked worker's trace and options, put there by the pool's initializer.
_WORKER_SET: list[tuple[TraceSet, TraceOptions]] = []


def _run_group(names: list[str]) -> dict[str, AnalysisResult]:
    return run_analyses(*_WORKER_SET[0], names)


@dataclass
class TraceReport:
    trace: TraceSet
    results: dict[str, AnalysisResult]
    findings: list[Finding] = field(default_factory=list)
    judged: bool = True  # False: only some analyses ran, and no rule read them


def analyze_trace(
    path: str | Path,
    *,
    hta_compatible: bool = False,
    options: TraceOptions | None = None,
    job_id: str | None = None,
    workers: int = 1,
    names: Iterable[str] | None = None,
) -> TraceReport:
    """Load, analyze and judge one trace (file or folder of ranks). With `names`, only those
    analyses run and no rule judges them: a rule whose analysis is missing would stay silent,
    not say the trace is fine."""
    options = options or TraceOptions()
    todo = selected_analyses(names)
    trace = load_trace_set(path, hta_compatible=hta_compatible, rank_workers=workers)
    results = run_analyses(trace, options, todo, workers=workers)
    if names is not None:
        return TraceReport(trace, results, [], judged=False)
    from analyzers.traces.findings import trace_findings  # the rules, only where they judge

    return TraceReport(trace, results, trace_findings(trace, results, options, job_id=job_id))
