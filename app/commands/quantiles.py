"""The card of `fleetscope quantiles` (fleetscope.plugins.CommandCard): the help `--help` prints,
and `register`, which imports the command's module only when the command is built:
analyzers.quantiles.cli."""

from __future__ import annotations

from typing import Any

HELP = "Percentiles of a metric by cluster, team, job or host, from sketches."


def register(subparsers: Any) -> None:
    from analyzers.quantiles import cli

    cli.register(subparsers)
