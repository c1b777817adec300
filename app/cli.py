"""The `fleetscope` command line: the registry's commands (app.commands) on the shared edge
(fleetscope.edge.run, where errors become messages and exit codes).

Only the module of the command being run is imported; the others are listed from the registry by
name and help, so `fleetscope --help` imports no stage (no numpy, no DuckDB). `build_parser()`
with no argv (docgen, tests) registers every command for real. Another package's command is an
entry point of `fleetscope.commands` (fleetscope.plugins), loaded when it is the one run.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from app.commands import COMMANDS
from fleetscope import __version__
from fleetscope.edge import run

if TYPE_CHECKING:
    from fleetscope.settings import Settings

Handler = Callable[[argparse.Namespace, "Settings"], int]

# Each command module once, in registry order.
COMMAND_MODULES: tuple[str, ...] = tuple(dict.fromkeys(c.module for c in COMMANDS))


class Subparsers(Protocol):
    def add_parser(self, name: str, **kwargs: object) -> argparse.ArgumentParser: ...


def chosen_command(argv: Sequence[str]) -> str | None:
    """The command `argv` runs, if any: its first word that is not an option."""
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word == "--config":
            skip = True
        elif not word.startswith("-"):
            return word
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given `argv`, only the module of the command it runs is imported."""
    parser = argparse.ArgumentParser(
        prog="fleetscope", description="Where your GPU-hours go, and how to win them back."
    )
    parser.add_argument("--version", action="version", version=f"fleetscope {__version__}")
    parser.add_argument(
        "--config", help="TOML settings file (default: $FLEETSCOPE_CONFIG or ./fleetscope.toml)"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    name = None if argv is None else chosen_command(argv)
    if argv is None:
        wanted = set(COMMAND_MODULES)
    else:
        wanted = {c.module for c in COMMANDS if c.name == name}
    registered: set[str] = set()
    for command in COMMANDS:
        if command.module in wanted:
            if command.module not in registered:
                importlib.import_module(command.module).register(subparsers)
                registered.add(command.module)
        else:
            subparsers.add_parser(command.name, help=command.help, add_help=False)
    # Other packages' commands (entry points of `fleetscope.commands`, fleetscope.plugins): read
    # only when one is run or every command is wanted, so the top-level help stays fast.
    if argv is None or (name and name not in {c.name for c in COMMANDS}):
        from fleetscope import plugins

        for plugin_name, entry in plugins.registered(plugins.COMMANDS).items():
            if argv is None or plugin_name == name:
                entry.load().register(subparsers)
    return parser


def follow_demo(args: argparse.Namespace, settings: Settings) -> Settings:
    """Point a command at the running `fleetscope demo` (var/demo.json under the data folder)
    for every setting the user left at its default, and say so on stderr."""
    from app import demo_discovery

    if getattr(args, "command", None) in demo_discovery.BLIND_COMMANDS:
        return settings
    settings, demo = demo_discovery.follow(settings)
    if demo is not None:
        print(
            f"fleetscope: reading the running demo (pid {demo.pid}) at "
            f"{demo.data_dir}; dashboard {demo.dashboard_url}",
            file=sys.stderr,
        )
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    return run(words, build_parser(words), follow_demo)


if __name__ == "__main__":
    sys.exit(main())
