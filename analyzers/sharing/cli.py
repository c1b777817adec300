"""Registers `fleetscope plan sharing` (see app.cli). Imports nothing heavy at module level.

fleetscope plan sharing [--days N] [--end ISO-TIME] [--format table|json]
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from fleetscope.settings import Settings


def register(subparsers: Any) -> None:
    plan = subparsers.add_parser("plan", help="Capacity plans from the fleet's telemetry.")
    sub = plan.add_subparsers(dest="plan_kind", metavar="KIND", required=True)
    sharing = sub.add_parser(
        "sharing",
        help="co-locate under-used GPUs (MPS, time-slicing, MIG) to free whole GPUs",
        description="Find persistently under-used GPUs, propose co-locations that free whole "
        "GPUs, with each job's expected slowdown and the constraints (docs/sharing.md).",
    )
    sharing.add_argument("--days", type=float, default=7.0, help="window length (default 7)")
    sharing.add_argument("--end", default=None, help="window end, ISO time (default: now)")
    sharing.add_argument("--format", choices=("table", "json"), default="table")
    sharing.set_defaults(handler=_sharing)


def _sharing(args: argparse.Namespace, settings: Settings) -> int:
    from datetime import UTC, datetime, timedelta

    from analyzers.run.window import Window
    from analyzers.sharing.plan import plan_sharing
    from analyzers.sharing.render import plan_to_dict, render_text
    from analyzers.sharing.usage import gpu_uses
    from fleetscope.errors import ConfigError
    from warehouse.read.window_reader import open_window

    if args.days <= 0:
        raise ConfigError(f"--days must be > 0, got {args.days}")
    try:
        end = datetime.fromisoformat(args.end) if args.end else datetime.now(UTC)
    except ValueError as exc:
        raise ConfigError(f"--end {args.end!r} is not an ISO time") from exc
    if end.tzinfo is None:
        end = end.replace(tzinfo=UTC)
    window = Window(end - timedelta(days=args.days), end)
    conn = open_window(settings, window.start, window.end)  # either mode (server.mode)
    try:
        plan = plan_sharing(gpu_uses(conn, window), window.hours)
    finally:
        conn.close()
    if args.format == "json":
        json.dump(plan_to_dict(plan), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(plan) + "\n")
    return 0
