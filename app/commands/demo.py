"""The card of `fleetscope demo` (fleetscope.plugins.CommandCard): the help `--help` prints,
and `register`, which imports the command's module only when the command is built:
app.demo."""

from __future__ import annotations

from typing import Any

HELP = "Run a simulated fleet, agents, server and dashboard until Ctrl-C."


def register(subparsers: Any) -> None:
    from app import demo

    demo.register(subparsers)
