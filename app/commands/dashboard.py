"""The card of `fleetscope dashboard` (fleetscope.plugins.CommandCard): the help `--help` prints,
and `register`, which imports the command's module only when the command is built:
dashboard.cli."""

from __future__ import annotations

from typing import Any

HELP = "Serve the Streamlit dashboard (fleet, jobs, traces, hosts)."


def register(subparsers: Any) -> None:
    from dashboard import cli

    cli.register(subparsers)
