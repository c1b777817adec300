"""The card of `fleetscope report` (fleetscope.plugins.CommandCard): the help `--help` prints,
and `register`, which imports the command's module only when the command is built:
analyzers.reports.cli."""

from __future__ import annotations

from typing import Any

HELP = "Efficiency reports (weekly HTML, PDF, Markdown)."


def register(subparsers: Any) -> None:
    from analyzers.reports import cli

    cli.register(subparsers)
