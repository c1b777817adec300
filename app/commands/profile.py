"""The card of `fleetscope profile` (fleetscope.plugins.CommandCard): the help `--help` prints,
and `register`, which imports the command's module only when the command is built:
app.profile_cli."""

from __future__ import annotations

from typing import Any

HELP = "Profile a running job on demand and print its trace findings."


def register(subparsers: Any) -> None:
    from app import profile_cli

    profile_cli.register(subparsers)
