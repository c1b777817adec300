"""The card of `fleetscope eval` (fleetscope.plugins.CommandCard): the help `--help` prints,
and `register`, which imports the command's module only when the command is built:
app.eval_cli."""

from __future__ import annotations

from typing import Any

HELP = "Analyzer precision/recall on the simulated and the field fleet."


def register(subparsers: Any) -> None:
    from app import eval_cli

    eval_cli.register(subparsers)
