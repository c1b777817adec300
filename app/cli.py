"""The `fleetscope` command line: the edge where errors become messages and exit codes.

Each stage owns its commands in a module listed in COMMAND_MODULES that exposes
`register(subparsers)`. A registering module must import nothing heavy at module level (DuckDB,
Streamlit, Celery, torch load inside the handlers), so `fleetscope --help` stays fast and the agent's
host never needs them. A handler is `(args, settings) -> exit code`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Protocol

from fleetscope import __version__
from fleetscope.edge import run
from fleetscope.settings import Settings

Handler = Callable[[argparse.Namespace, Settings], int]

COMMAND_MODULES: tuple[str, ...] = (
    "app.config_cli",
    "app.demo",
    "app.profile_cli",
    "simulator.cli",
    "warehouse.cli",
    "analyzers.cli",
    "app.eval_cli",
    "analyzers.traces.cli",
    "analyzers.sharing.cli",
    "analyzers.quantiles.cli",
    "analyzers.reports.cli",
    "dashboard.cli",
)


class Subparsers(Protocol):
    def add_parser(self, name: str, **kwargs: object) -> argparse.ArgumentParser: ...


def build_parser(modules: Sequence[str] = COMMAND_MODULES) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fleetscope", description="Where your GPU-hours go, and how to win them back."
    )
    parser.add_argument("--version", action="version", version=f"fleetscope {__version__}")
    parser.add_argument(
        "--config", help="TOML settings file (default: $FLEETSCOPE_CONFIG or ./fleetscope.toml)"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in modules:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run(argv, build_parser())


if __name__ == "__main__":
    sys.exit(main())
