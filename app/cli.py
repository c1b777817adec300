"""The `fleetscope` command line: the installed commands (entry points of `fleetscope.commands`,
fleetscope.plugins; fleetscope's own are app/commands/) on the shared edge (fleetscope.edge.run,
where errors become messages and exit codes).

Only the command being run is registered for real (its card's `register` imports its module);
every other one is listed by name and its card's `HELP`, so `fleetscope --help` imports the cards
and no stage (no numpy, no DuckDB). `build_parser()` with no argv (docgen, tests) registers every
command for real. Commands are listed by name, whichever package installs them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from fleetscope import __version__, plugins
from fleetscope.edge import run

if TYPE_CHECKING:
    from fleetscope.settings import Settings

Handler = Callable[[argparse.Namespace, "Settings"], int]


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


def commands() -> dict[str, plugins.CommandCard]:
    """Every installed command's card by command name, in name order (loading a card imports
    only the card)."""
    cards = plugins.registered(plugins.COMMANDS)
    return {name: cards[name].load() for name in sorted(cards)}


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
    for command, card in commands().items():
        if argv is None or command == name:
            card.register(subparsers)
        else:
            subparsers.add_parser(command, help=plugins.command_help(card), add_help=False)
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
