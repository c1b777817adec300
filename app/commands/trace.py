"""The card of `fleetscope trace` (fleetscope.plugins.CommandCard): the help `--help` prints,
and `register`, which imports the command's module only when the command is built:
analyzers.traces.cli."""

from __future__ import annotations

from typing import Any

HELP = "PyTorch profiler (Kineto) trace analysis."


def register(subparsers: Any) -> None:
    from analyzers.traces import cli

    cli.register(subparsers)
