"""`fleetscope report weekly`: write (and optionally mail) weekly efficiency reports.

    fleetscope report weekly [--team T | --user U | --admin | --all] [--week 2026-W47]
                             [--out DIR] [--send] [--no-pdf]

Without a scope flag the fleet (admin) report is written. The week defaults to the last complete
ISO week; when that week holds no samples, the latest week that does (and stderr says which weeks
have data). Heavy imports happen inside the handler (app.cli's rule).
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleetscope.settings import Settings


def run_report(args: argparse.Namespace, settings: Settings) -> int:
    from analyzers.reports.build import Scope
    from analyzers.reports.runner import (
        open_sources,
        out_dir,
        report_span,
        scopes_for,
        send_once,
        weeks_with_data,
        write_weekly,
    )
    from analyzers.reports.week import IsoWeek, default_week

    folder = Path(args.out) if args.out else out_dir(settings)
    if args.week:
        week = IsoWeek.parse(args.week)
    else:
        week, note = default_week(datetime.now(UTC), weeks_with_data(settings))
        if note:
            print(f"fleetscope report: {note}", file=sys.stderr)
    # The week and the trend weeks before it, read in either mode (warehouse.read.window_reader).
    con, catalog = open_sources(settings, *report_span(settings, week))
    if args.all:
        scopes = scopes_for(catalog)
    elif args.team:
        scopes = [Scope("team", args.team)]
    elif args.user:
        scopes = [Scope("user", args.user)]
    else:
        scopes = [Scope("admin")]
    for scope in scopes:
        files = write_weekly(settings, con, catalog, week, scope, folder, pdf=not args.no_pdf)
        print(f"{scope.slug} {week}: {files.html}")
        if files.pdf is not None:  # the PDF is what gets mailed: its path printed too
            print(f"{scope.slug} {week}: {files.pdf}")
        if args.send:
            sent = send_once(settings, catalog, week, scope, files)
            if sent.already_sent:
                print("  already sent for this week: not sent again")
            else:
                print(f"  sent to {', '.join(sent.sent_to)}")
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report", help="Efficiency reports (weekly HTML, PDF, Markdown)."
    )
    kinds = parser.add_subparsers(dest="report_kind", metavar="KIND", required=True)
    weekly = kinds.add_parser(
        "weekly", help="A week's efficiency report for a team, user or fleet."
    )
    scope = weekly.add_mutually_exclusive_group()
    scope.add_argument("--team", help="report for this team")
    scope.add_argument("--user", help="report for this user")
    scope.add_argument("--admin", action="store_true", help="fleet report ranked by team (default)")
    scope.add_argument("--all", action="store_true", help="fleet, every team and every user")
    weekly.add_argument(
        "--week",
        help="ISO week like 2026-W47 (default: last complete week, else the latest with data)",
    )
    weekly.add_argument("--out", help="folder to write to (default: reports.out_dir)")
    weekly.add_argument("--send", action="store_true", help="mail it (once per scope and week)")
    weekly.add_argument("--no-pdf", action="store_true", help="skip the PDF (no Chromium)")
    weekly.set_defaults(handler=run_report)
