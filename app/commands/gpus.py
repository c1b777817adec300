"""The card of `fleetscope gpus` (fleetscope.plugins.CommandCard): the help that `--help`
prints, and `register`, which imports the command's module only when the command is built:
dashboard.listing_cli (the Gpus page's numbers, without Streamlit)."""

from __future__ import annotations

from typing import Any

HELP = "Per GPU: utilization, temperature, power, memory."


def register(subparsers: Any) -> None:
    from dashboard import listing_cli

    listing_cli.register_gpus(subparsers)
