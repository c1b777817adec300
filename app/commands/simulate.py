"""The card of `fleetscope simulate` (fleetscope.plugins.CommandCard): the help `--help` prints,
and `register`, which imports the command's module only when the command is built:
simulator.cli."""

from __future__ import annotations

from typing import Any

HELP = "Serve simulated dcgm-exporter endpoints, or generate a simulated fleet's tables."


def register(subparsers: Any) -> None:
    from simulator import cli

    cli.register(subparsers)
