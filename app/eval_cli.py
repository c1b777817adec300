"""Registers `fleetscope eval` (see app.cli): analyzer precision, recall and GPU-hours error on the
simulated fleet. In the app because it joins two packages no stage may join: the simulator and the
analyzers. Heavy imports stay inside the handler.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleetscope.settings import Settings


def cmd_eval(args: argparse.Namespace, settings: Settings) -> int:
    from app.evaluation import evaluate, render

    report = evaluate(hosts=args.hosts, hours=args.hours, seed=args.seed)
    print(render(report))
    return 0 if report.passed or not args.strict else 1


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("eval", help="Analyzer precision/recall on the simulated fleet.")
    p.add_argument("--hosts", type=int, default=8)
    p.add_argument("--hours", type=float, default=12.0)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--strict", action="store_true", help="exit 1 below the quality targets")
    p.set_defaults(handler=cmd_eval)
