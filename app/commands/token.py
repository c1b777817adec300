"""The card of `fleetscope token` (fleetscope.plugins.CommandCard): the help `--help` prints,
and `register`, which imports the command's module only when the command is built:
warehouse.cli."""

from __future__ import annotations

from typing import Any

HELP = "Manage agent bearer tokens."


def register(subparsers: Any) -> None:
    from warehouse import cli

    cli.register_token(subparsers)
