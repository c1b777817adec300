"""The card of `fleetscope analyzers` (fleetscope.plugins.CommandCard): the help `--help` prints,
and `register`, which imports the command's module only when the command is built:
analyzers.cli."""

from __future__ import annotations

from typing import Any

HELP = "List registered analyzers, rules, thresholds."


def register(subparsers: Any) -> None:
    from analyzers import cli

    cli.register_analyzers(subparsers)
