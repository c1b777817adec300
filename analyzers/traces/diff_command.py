"""`fleetscope trace diff A B`: which ops and kernels changed between two traces (before/after a
change, or two ranks), as HTA's `TraceDiff.compare_traces` and `ops_diff` compute it
(analyses/trace_diff.py). Prints a table (largest duration change first) or JSON; a bad path,
rank or iteration is a TraceError, which the edge (fleetscope/edge.py) turns into a message and
exit code. Reads files and no setting.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["register"]

TEXT_ROWS = 25


def register(sub: Any) -> None:
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
        diff.add_argument(f"--rank-{side}", type=int, default=None, help=f"rank of {side.upper()}")
        diff.add_argument(
            f"--iteration-{side}",
            default=None,
            help=f"ProfilerStep number of {side.upper()}, or 'all' (default: the first)",
        )
    diff.add_argument("--device", choices=("all", "cpu", "gpu"), default="all")
    diff.add_argument(
        "--hta-compatible",
        action="store_true",
        help="use HTA 0.5.0's load rules (ns rounding, last step dropped), so numbers equal HTA's",
    )
    diff.add_argument("--format", choices=("table", "json"), default="table")
    diff.set_defaults(standalone=_diff)


def _iteration(text: str | None) -> int | str | None:
    from fleetscope.errors import TraceError

    if text is None or text == "all":
        return text
    try:
        return int(text)
    except ValueError:
        raise TraceError(
            f"--iteration must be a ProfilerStep number or 'all', got {text!r}"
        ) from None


def _diff(args: argparse.Namespace) -> int:
    from analyzers.traces.analyses.trace_diff import compare_traces, ops_diff
    from analyzers.traces.api import load_trace_set
    from analyzers.traces.render import json_ready

    control = load_trace_set(args.control, hta_compatible=args.hta_compatible)
    test = load_trace_set(args.test, hta_compatible=args.hta_compatible)
    table = compare_traces(
        control,
        test,
        control_rank=args.rank_a,
        test_rank=args.rank_b,
        control_iteration=_iteration(args.iteration_a),  # type: ignore[arg-type]
        test_iteration=_iteration(args.iteration_b),  # type: ignore[arg-type]
        device=args.device,
    )
    changes = ops_diff(table)
    if args.format == "json":
        data = {
            "control": str(args.control),
            "test": str(args.test),
            "columns": list(table.columns),
            "rows": json_ready([list(r) for r in table.rows]),
            "ops_diff": changes,
        }
        sys.stdout.write(json.dumps(data, indent=1) + "\n")
        return 0
    sys.stdout.write(_text(args, table.columns, table.rows, changes))
    return 0


def _cell(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 70 else text[:67] + "..."


def _text(
    args: argparse.Namespace,
    columns: tuple[str, ...],
    rows: tuple[tuple[Any, ...], ...],
    changes: dict[str, list[str]],
) -> str:
    out = [f"control (A): {args.control}", f"test (B):    {args.test}", ""]
    out.append("  ".join(f"{k} {len(v)}" for k, v in changes.items()) + "  (names)")
    for kind in ("added", "deleted"):
        for name in changes[kind][:10]:
            out.append(f"  {kind}: {_cell(name)}")
    out.append("")
    shown = ("name", "control_counts", "test_counts", "control_total_duration",
             "test_total_duration", "diff_duration")  # fmt: skip
    pick = [columns.index(c) for c in shown]
    cells = [[_cell(r[i]) if i == 0 else _number(r[i]) for i in pick] for r in rows[:TEXT_ROWS]]
    heads = ["name", "count A", "count B", "A us", "B us", "B-A us"]
    widths = [max(len(h), *(len(c[k]) for c in cells)) if cells else len(h)
              for k, h in enumerate(heads)]  # fmt: skip
    out.append("  ".join(h.ljust(w) if k == 0 else h.rjust(w)
                         for k, (h, w) in enumerate(zip(heads, widths, strict=True))))  # fmt: skip
    for c in cells:
        out.append("  ".join(v.ljust(w) if k == 0 else v.rjust(w)
                             for k, (v, w) in enumerate(zip(c, widths, strict=True))))  # fmt: skip
    if len(rows) > TEXT_ROWS:
        out.append(f"... {len(rows) - TEXT_ROWS} more names (--format json for all)")
    return "\n".join(out) + "\n"


def _number(value: Any) -> str:
    number = float(value)
    return f"{number:.0f}" if abs(number) >= 10 or number.is_integer() else f"{number:.2f}"
