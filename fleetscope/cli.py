"""The `fleetscope` command line: the edge where errors become messages and exit codes.

Each stage owns its commands in a module listed in COMMAND_MODULES that exposes
`register(subparsers)`. A registering module must import nothing heavy at module level (DuckDB,
Streamlit, Celery, torch load inside the handlers), so `fleetscope --help` stays fast and the agent's
host never needs them. A handler is `(args, settings) -> exit code`.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Protocol

from fleetscope import __version__, demo_discovery
from fleetscope.errors import FleetscopeError
from fleetscope.settings import Settings, load_settings

Handler = Callable[[argparse.Namespace, Settings], int]

COMMAND_MODULES: tuple[str, ...] = (
    "fleetscope.config_cli",
    "fleetscope.demo",
    "fleetscope.profile_cli",
    "collector.simulator.cli",
    "warehouse.cli",
    "analyzers.cli",
    "analyzers.traces.cli",
    "analyzers.quantiles_cli",
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


def run(argv: Sequence[str] | None, parser: argparse.ArgumentParser) -> int:
    """Parse, load settings, call the handler; the one place errors become messages and codes.

    `fleetscope-agent` goes through here too, so both commands behave the same at the edge.
    """
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        settings = load_settings(args.config)
        if parser.prog == "fleetscope" and args.command not in demo_discovery.BLIND_COMMANDS:
            settings, demo = demo_discovery.follow(settings)
            if demo is not None:
                print(
                    f"{parser.prog}: reading the running demo (pid {demo.pid}) at "
                    f"{demo.data_dir}; dashboard {demo.dashboard_url}",
                    file=sys.stderr,
                )
        logging.basicConfig(
            level=settings.get_str("core.log_level").upper(),
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        return handler(args, settings)
    except FleetscopeError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `fleetscope ... | head`: the reader left, which is not an error
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run(argv, build_parser())


if __name__ == "__main__":
    sys.exit(main())
