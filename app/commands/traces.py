"""The card of `fleetscope traces` (fleetscope.plugins.CommandCard): the help that `--help`
prints, and `register`, which imports the command's module only when the command is built:
dashboard.listing_cli (the Traces page's numbers, without Streamlit)."""

from __future__ import annotations

from typing import Any

HELP = "Captured profiler traces, newest first."


def register(subparsers: Any) -> None:
    from dashboard import listing_cli

    listing_cli.register_traces(subparsers)
