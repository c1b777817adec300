"""`fleetscope trace` (see app.cli): analyze, fetch, diff and counters; nothing heavy imported at
module level. A bad path, rank or option is a TraceError or ConfigError, which the edge
(fleetscope/edge.py) turns into a message and exit code. Only `fetch` reads settings.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any

DIFF_ROWS = 25


def register(subparsers: Any) -> None:
    trace = subparsers.add_parser("trace", help="PyTorch profiler (Kineto) trace analysis.")
    sub = trace.add_subparsers(dest="trace_command", metavar="SUBCOMMAND")
    analyze = sub.add_parser(
        "analyze",
        help="analyze trace files or folders of ranks",
        description="Temporal, idle-time, kernel, overlap, launch, queue, memory, data-loader, "
        "sync, pageable-copy, gap, utilization, tensor-core, SM-efficiency and what-if analyses, "
        "with findings (rules T1-T13).",
    )
    analyze.add_argument("paths", nargs="+", metavar="PATH", help="trace file or folder of ranks")
    _hta_flag(analyze, "and definitions, so shared numbers equal HTA's")
    analyze.add_argument("--format", choices=("table", "json"), default="table")
    analyze.add_argument("--job", help="job id to stamp on findings")
    analyze.add_argument(
        "--gpus", type=int, default=0, help="GPUs the job holds (default: the trace's world size)"
    )
    analyze.add_argument(
        "--analyses",
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
    diff = sub.add_parser(
        "diff",
        help="compare two traces: ops and kernels added, removed, changed",
        description="Compare the ops and kernels of two traces (before/after a change, or two "
        "ranks): counts and total duration per name, and the names added, deleted, increased, "
        "decreased or unchanged (HTA 0.5.0 TraceDiff). Default: the first rank and first "
        "ProfilerStep iteration of each, CPU and GPU.",
    )
    diff.add_argument("control", metavar="A", help="the control trace (file or folder of ranks)")
    diff.add_argument("test", metavar="B", help="the test trace (file or folder of ranks)")
    for side in ("a", "b"):
        diff.add_argument(f"--rank-{side}", type=int, help=f"rank of {side.upper()}")
        diff.add_argument(
            f"--iteration-{side}",
            help=f"ProfilerStep number of {side.upper()}, or 'all' (default: the first)",
        )
    diff.add_argument("--device", choices=("all", "cpu", "gpu"), default="all")
    _hta_flag(diff, "(ns rounding, last step dropped), so numbers equal HTA's")
    diff.add_argument("--format", choices=("table", "json"), default="table")
    diff.set_defaults(standalone=_diff)
    counters = sub.add_parser(
        "counters",
        help="write the trace with queue-length and copy-bandwidth counter tracks",
        description="Write each rank's trace again, with counter events for the launch queue "
        "length of every stream and the bandwidth of every copy kind (HTA 0.5.0 "
        "generate_trace_with_counters), as OUT/<name>_with_counters.json.gz.",
    )
    counters.add_argument("path", metavar="PATH", help="trace file or folder of ranks")
    counters.add_argument("--out", default=".", help="folder to write to (default: .)")
    _hta_flag(counters, "(ns rounding, last step dropped), as HTA's tracks do")
    counters.set_defaults(standalone=_counters)
    trace.set_defaults(handler=lambda args, settings: trace.print_help() or 2)  # usage


def _hta_flag(parser: Any, why: str) -> None:
    parser.add_argument(
        "--hta-compatible", action="store_true", help=f"use HTA 0.5.0's load rules {why}"
    )


def _analyze(args: argparse.Namespace) -> int:
    from analyzers.traces.analyses.base import TraceOptions
    from analyzers.traces.api import analyze_trace
    from analyzers.traces.render import render_text, report_json
    from fleetscope.errors import ConfigError

    for flag in ("gpus", "workers"):
        if getattr(args, flag) < 0:
            raise ConfigError(f"--{flag} must be >= 0, got {getattr(args, flag)}")
    options = TraceOptions(gpus=args.gpus)
    names = None if args.analyses is None else [n.strip() for n in args.analyses.split(",")]
    if names is not None and not all(names):
        raise ConfigError(f"--analyses takes names separated by commas, got {args.analyses!r}")
    reports = [
        analyze_trace(
            path,
            hta_compatible=args.hta_compatible,
            options=options,
            job_id=args.job,
            workers=args.workers,
            names=names,
        )
        for path in args.paths
    ]
    if args.format == "json":
        sys.stdout.write(report_json(reports))
    else:
        sys.stdout.write("\n\n".join(render_text(r) for r in reports) + "\n")
    return 0


def _fetch(args: argparse.Namespace, settings: Any) -> int:
    from warehouse.profiling.trace_backend import trace_storage
    from warehouse.profiling.trace_files import TRACE_SUFFIX, write_atomically

    storage = trace_storage(settings)
    folder = Path(args.dir)
    for trace_id in args.trace_ids:  # NotFoundError names a missing one (exit code at the edge)
        path = write_atomically(folder, f"{trace_id}{TRACE_SUFFIX}", storage.read_bytes(trace_id))
        sys.stdout.write(f"{path}\n")
    return 0


def _iteration(text: str | None) -> Any:
    from fleetscope.errors import TraceError

    try:
        return text if text is None or text == "all" else int(text)
    except ValueError:
        message = f"--iteration must be a ProfilerStep number or 'all', got {text!r}"
        raise TraceError(message) from None


def _diff(args: argparse.Namespace) -> int:
    from analyzers.traces.analyses.trace_diff import compare_traces, ops_diff
    from analyzers.traces.api import load_trace_set
    from analyzers.traces.render import json_ready

    hta = args.hta_compatible
    control, test = (load_trace_set(p, hta_compatible=hta) for p in (args.control, args.test))
    table = compare_traces(
        control,
        test,
        control_rank=args.rank_a,
        test_rank=args.rank_b,
        control_iteration=_iteration(args.iteration_a),
        test_iteration=_iteration(args.iteration_b),
        device=args.device,
    )
    changes = ops_diff(table)
    if args.format == "table":
        sys.stdout.write(_diff_text(args, table, changes))
    else:
        data = {
            "control": args.control,
            "test": args.test,
            "columns": table.columns,
            "rows": json_ready(table.rows),
            "ops_diff": changes,
        }
        sys.stdout.write(json.dumps(data, indent=1) + "\n")
    return 0


def _diff_text(args: argparse.Namespace, table: Any, changes: dict[str, list[str]]) -> str:
    from analyzers.traces.render import clip

    out = [f"control (A): {args.control}", f"test (B):    {args.test}", ""]
    out.append("  ".join(f"{k} {len(v)}" for k, v in changes.items()) + "  (names)")
    out += [f"  {k}: {clip(name, 70)}" for k in ("added", "deleted") for name in changes[k][:10]]
    out.append("")
    rows = table.rows  # trace_diff.COLUMNS
    cells = [["name", "count A", "count B", "A us", "B us", "B-A us"]]
    for name, ca, ta, cb, tb, _, diff, _ in rows[:DIFF_ROWS]:
        cells.append([clip(name, 70), *map(_number, (ca, cb, ta, tb, diff))])
    widths = [max(len(c[k]) for c in cells) for k in range(len(cells[0]))]
    for c in cells:
        out.append("  ".join([c[0].ljust(widths[0]), *map(str.rjust, c[1:], widths[1:])]))
    if len(rows) > DIFF_ROWS:
        out.append(f"... {len(rows) - DIFF_ROWS} more names (--format json for all)")
    return "\n".join(out) + "\n"


def _number(value: Any) -> str:
    number = float(value)
    return f"{number:.0f}" if abs(number) >= 10 or number.is_integer() else f"{number:.2f}"


def _counters(args: argparse.Namespace) -> int:
    from analyzers.traces.analyses.counters import counter_events
    from analyzers.traces.api import load_trace_set
    from fleetscope.errors import TraceError

    trace = load_trace_set(args.path, hta_compatible=args.hta_compatible)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise TraceError(f"--out {out}: not a folder")
    out.mkdir(parents=True, exist_ok=True)
    for frame in trace.frames():
        events = counter_events(frame, trace.origin_us)
        text = frame.path.read_bytes()  # gzip by its magic bytes, as the loader reads it
        content = json.loads(gzip.decompress(text) if text[:2] == b"\x1f\x8b" else text)
        content.setdefault("traceEvents", []).extend(events)
        name = frame.path.name.removesuffix(".gz").removesuffix(".json")
        target = out / f"{name}_with_counters.json.gz"
        with gzip.open(target, "wt") as f:
            json.dump(content, f)
        sys.stdout.write(f"{target}  rank {frame.rank}: {len(events)} counter events\n")
    return 0
