"""The card of `fleetscope config` (fleetscope.plugins.CommandCard): the help `--help` prints,
and `register`, which imports the command's module only when the command is built:
app.config_cli."""

from __future__ import annotations

from typing import Any

HELP = "Inspect settings."


def register(subparsers: Any) -> None:
    from app import config_cli

    config_cli.register(subparsers)
