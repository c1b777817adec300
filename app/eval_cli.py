"""Registers `fleetscope eval` (see app.cli): analyzer precision, recall and GPU-hours error on the
simulated fleet and on the independent field fleet. In the app because it joins two packages no
stage may join: the simulator (both generators) and the analyzers. Heavy imports stay inside the
handler.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleetscope.settings import Settings


def cmd_eval(args: argparse.Namespace, settings: Settings) -> int:
    passed = True
    if args.generator in ("simulator", "both"):
        from app.evaluation import evaluate, render

        report = evaluate(hosts=args.hosts, hours=args.hours, seed=args.seed)
        print(render(report))
        passed = passed and report.passed
    if args.generator in ("field", "both"):
        from app.field_eval import evaluate_field, render_field

        field = evaluate_field()
        print(("\n" if args.generator == "both" else "") + render_field(field))
        passed = passed and field.passed
    return 0 if passed or not args.strict else 1


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "eval", help="Analyzer precision/recall on the simulated and the field fleet."
    )
    p.add_argument("--hosts", type=int, default=8)
    p.add_argument("--hours", type=float, default=12.0)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--strict", action="store_true", help="exit 1 below the quality targets")
    p.add_argument(
        "--generator",
        choices=["simulator", "field", "both"],
        default="both",
        help="simulator: the built-in simulator's fleet; field: an independent fleet written "
        "from real jobs' published behaviour (simulator/field_fleet.py)",
    )
    p.set_defaults(handler=cmd_eval)
