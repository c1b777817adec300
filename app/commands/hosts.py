"""The card of `fleetscope hosts` (fleetscope.plugins.CommandCard): the help that `--help`
prints, and `register`, which imports the command's module only when the command is built:
dashboard.listing_cli (the Hosts page's numbers, without Streamlit)."""

from __future__ import annotations

from typing import Any

HELP = "Per host: GPU use, load, memory, jobs and health."


def register(subparsers: Any) -> None:
    from dashboard import listing_cli

    listing_cli.register_hosts(subparsers)
