"""Registers `fleetscope trace analyze` (see app.cli). Imports nothing heavy at module level.

    fleetscope trace analyze PATH... [--hta-compatible] [--format json|table] [--job JOB] [--gpus N]
                             [--workers N] [--analyses NAME,...]
    fleetscope trace fetch TRACE_ID... [--dir DIR]

Each PATH is one profiling session: a trace file, or a folder holding one file per rank. `fetch`
copies traces the server stored (by the ids `fleetscope profile` prints) from where `server.mode`
keeps them (warehouse.profiling.trace_backend: the data folder, or the fleet's object store) into DIR.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(subparsers: Any) -> None:
    trace = subparsers.add_parser("trace", help="PyTorch profiler (Kineto) trace analysis.")
    sub = trace.add_subparsers(dest="trace_command", metavar="SUBCOMMAND")
    analyze = sub.add_parser(
        "analyze",
        help="analyze trace files or folders of ranks",
        description="Temporal, idle-time, kernel, overlap, launch, queue, memory, data-loader, "
        "sync, pageable-copy, gap, utilization, tensor-core and what-if analyses, with findings "
        "(rules T1-T12).",
    )
    analyze.add_argument("paths", nargs="+", metavar="PATH", help="trace file or folder of ranks")
    analyze.add_argument(
        "--hta-compatible",
        action="store_true",
        help="use HTA 0.5.0's load rules and definitions, so shared numbers equal HTA's",
    )
    analyze.add_argument("--format", choices=("table", "json"), default="table")
    analyze.add_argument("--job", default=None, help="job id to stamp on findings")
    analyze.add_argument(
        "--gpus", type=int, default=0, help="GPUs the job holds (default: the trace's world size)"
    )
    analyze.add_argument(
        "--analyses",
        default=None,
        metavar="NAME,...",
        help="run only these analyses (registry names, e.g. temporal_breakdown,critical_path), as "
        "one HTA call runs one; findings need every analysis and are left out",
    )
    analyze.add_argument(
        "--workers",
        type=int,
        default=0,
        metavar="N",
        help="processes that read a folder's rank files and run the analyses of a large set "
        "(default 0: one per CPU; 1: all in this process)",
    )
    # Reads files and no setting: runs without the settings loader (fleetscope.edge).
    analyze.set_defaults(standalone=_analyze)
    fetch = sub.add_parser(
        "fetch",
        help="copy stored traces, by id, into a folder",
        description="Copy traces the server stored (ids as `fleetscope profile` prints them) from "
        "the trace storage of server.mode (the data folder, or in fleet mode the object store) "
        "into DIR, and print each file's path, for `fleetscope trace analyze`.",
    )
    fetch.add_argument("trace_ids", nargs="+", metavar="TRACE_ID")
    fetch.add_argument("--dir", default=".", help="folder to write the trace files to (default: .)")
    fetch.set_defaults(handler=_fetch)
    from analyzers.traces import counters_command, diff_command

    diff_command.register(sub)
    counters_command.register(sub)
    trace.set_defaults(handler=lambda args, settings: trace.print_help() or 2)  # usage


def _analyze(args: argparse.Namespace) -> int:
    from analyzers.traces.analyses.base import TraceOptions
    from analyzers.traces.api import analyze_trace
    from analyzers.traces.render import render_text, report_json
    from fleetscope.errors import ConfigError

    if args.gpus < 0:
        raise ConfigError(f"--gpus must be >= 0, got {args.gpus}")
    if args.workers < 0:
        raise ConfigError(f"--workers must be >= 0, got {args.workers}")
    options = TraceOptions(gpus=args.gpus)
    names = None if args.analyses is None else [n.strip() for n in args.analyses.split(",")]
    if names is not None and not all(names):
        raise ConfigError(f"--analyses takes names separated by commas, got {args.analyses!r}")
    reports = [
        analyze_trace(
            path, hta_compatible=args.hta_compatible, options=options, job_id=args.job,
            workers=args.workers, names=names,
        )
        for path in args.paths
    ]  # fmt: skip
    if args.format == "json":
        sys.stdout.write(report_json(reports))
    else:
        sys.stdout.write("\n\n".join(render_text(r) for r in reports) + "\n")
    return 0


def _fetch(args: argparse.Namespace, settings: Any) -> int:
    from pathlib import Path

    from warehouse.profiling.trace_backend import trace_storage
    from warehouse.profiling.trace_files import TRACE_SUFFIX, write_atomically

    storage = trace_storage(settings)
    folder = Path(args.dir)
    for trace_id in args.trace_ids:  # NotFoundError names a missing one (exit code at the edge)
        path = write_atomically(folder, f"{trace_id}{TRACE_SUFFIX}", storage.read_bytes(trace_id))
        sys.stdout.write(f"{path}\n")
    return 0
