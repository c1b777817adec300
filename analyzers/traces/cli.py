"""Registers `fleetscope trace analyze` (see app.cli). Imports nothing heavy at module level.

    fleetscope trace analyze PATH... [--hta-compatible] [--format json|table] [--job JOB] [--gpus N]
    fleetscope trace fetch TRACE_ID... [--dir DIR]

Each PATH is one profiling session: a trace file, or a folder holding one file per rank. `fetch`
copies traces the server stored (by the ids `fleetscope profile` prints) from where `server.mode`
keeps them (warehouse.trace_storage: the data folder, or the fleet's object store) into DIR.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from analyzers.traces.load import RawTrace


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
    trace.set_defaults(handler=lambda args, settings: _usage(trace))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _analyze(args: argparse.Namespace) -> int:
    from analyzers.traces import xp
    from analyzers.traces.engine import engine_for

    # A caller that is not the whole process (a test, a script calling `main`) gets numpy unless
    # it asks for lite: a lite run that cannot answer exactly raises there (_analyze_lite).
    engine = xp.preference()
    if engine is None:
        engine = engine_for(args.paths) if getattr(args, "whole_process", False) else "numpy"
    if engine == "lite":
        return _analyze_lite(args)
    return _analyze_numpy(args)


def _analyze_numpy(args: argparse.Namespace) -> int:
    # The files start loading in forked children now, before numpy is imported, and load while
    # this process imports (analyzers/traces/prefetch.py says why and when not).
    from analyzers.traces.prefetch import prefetch_traces

    with prefetch_traces(args.paths) as prefetched:
        sys.stdout.write(_report_text(args, prefetched.load))
    return 0


def _analyze_lite(args: argparse.Namespace) -> int:
    """A small trace on listnp (engine.py); on anything it cannot do exactly, the command on
    numpy when this process is the whole command (nothing printed yet, so what the user sees is
    the numpy run's output or error): by the numpy standby where one was forked (standby.py),
    else in a fresh process. A caller that is not the whole process gets the error."""
    from analyzers.traces import xp

    whole_process = getattr(args, "whole_process", False)
    standby = None
    if whole_process:
        from analyzers.traces.standby import Standby, start_standby

        # A fork that imports numpy on the other core, should lite give up (standby.py).
        started = start_standby(args.paths)
        if started is not None and not isinstance(started, Standby):
            return _analyze_numpy(args)  # this process is that fork, and lite gave up
        standby = started
    xp.choose("lite")
    try:
        from analyzers.traces.load import load_raw_trace

        # The reference decoder (the stdlib's): on a small file its slower decode (~4 us an
        # event) costs less than importing msgspec and zlib-ng for the fast one (~10 ms).
        text = _report_text(args, lambda path: load_raw_trace(path, decoder="stdlib"))
    except Exception:
        if not whole_process:
            raise
        if standby is not None and (code := standby.take_over()) is not None:
            return code
        _rerun_on_numpy()
    if standby is not None:
        standby.cancel()
    sys.stdout.write(text)
    return 0


def _rerun_on_numpy() -> NoReturn:
    from analyzers.traces.xp import ENV

    sys.stdout.flush()
    sys.stderr.flush()
    os.environ[ENV] = "numpy"
    os.execv(sys.executable, sys.orig_argv)


def _report_text(args: argparse.Namespace, load: Callable[[Path], RawTrace]) -> str:
    from analyzers.traces.numpy_docs import numpy_as_a_command_imports_it

    with numpy_as_a_command_imports_it(getattr(args, "whole_process", False)):
        from analyzers.traces.analyses.base import TraceOptions
        from analyzers.traces.api import analyze_trace
        from analyzers.traces.render import render_text, report_json
    from fleetscope.errors import ConfigError

    if args.gpus < 0:
        raise ConfigError(f"--gpus must be >= 0, got {args.gpus}")
    options = TraceOptions(gpus=args.gpus)
    reports = [
        analyze_trace(
            path, hta_compatible=args.hta_compatible, options=options, job_id=args.job, load=load
        )
        for path in args.paths
    ]
    if args.format == "json":
        return report_json(reports)
    return "\n\n".join(render_text(r) for r in reports) + "\n"


def _fetch(args: argparse.Namespace, settings: Any) -> int:
    from pathlib import Path

    from warehouse.trace_storage import trace_storage
    from warehouse.trace_store import TRACE_SUFFIX, write_atomically

    storage = trace_storage(settings)
    folder = Path(args.dir)
    for trace_id in args.trace_ids:  # NotFoundError names a missing one (exit code at the edge)
        path = write_atomically(folder, f"{trace_id}{TRACE_SUFFIX}", storage.read_bytes(trace_id))
        sys.stdout.write(f"{path}\n")
    return 0
