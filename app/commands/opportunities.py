"""The card of `fleetscope opportunities` (fleetscope.plugins.CommandCard): the help that
`--help` prints, and `register`, which imports the command's module only when the command is built:
analyzers.cli."""

from __future__ import annotations

from typing import Any

HELP = "Recoverable GPU-hours, ranked fleet-wide."


def register(subparsers: Any) -> None:
    from analyzers import cli

    cli.register_opportunities(subparsers)
