"""The card of `fleetscope plan` (fleetscope.plugins.CommandCard): the help `--help` prints,
and `register`, which imports the command's module only when the command is built:
analyzers.sharing.cli."""

from __future__ import annotations

from typing import Any

HELP = "Capacity plans from the fleet's telemetry."


def register(subparsers: Any) -> None:
    from analyzers.sharing import cli

    cli.register(subparsers)
