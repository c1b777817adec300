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
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from fleetscope import __version__, plugins
from fleetscope.edge import run
from fleetscope.errors import ConfigError

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
    only the card); a card that cannot be loaded raises ConfigError."""
    return {name: _card(name) for name in sorted(plugins.required(plugins.COMMANDS))}


def _card(name: str) -> plugins.CommandCard:
    entry = plugins.required(plugins.COMMANDS)[name]
    try:
        card: plugins.CommandCard = entry.load()
    except Exception as exc:  # a broken plug-in's card: its own error, whatever it raised
        raise ConfigError(f"command {name}: cannot load {entry.value}: {exc}") from exc
    return card


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given `argv` that names an installed command, only that command is on it
    (its module imported), since parsing its words needs no other: the rest are listed, by
    their cards, only for the top-level help or a command name argparse must refuse with the
    list. A command whose card cannot be loaded (a broken plug-in) is listed as such, so it
    stops only itself; with no `argv` (every command registered) it is an error."""
    installed = plugins.required(plugins.COMMANDS)
    name = None if argv is None else chosen_command(argv)
    parser = _Parser(
        prog="fleetscope", description="Where your GPU-hours go, and how to win them back."
    )
    parser.add_argument("--version", action="version", version=f"fleetscope {__version__}")
    parser.add_argument(
        "--config", help="TOML settings file (default: $FLEETSCOPE_CONFIG or ./fleetscope.toml)"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    if name in installed:  # ~20 parsers and cards fewer: ~15 ms of every command (issue 19)
        _card(name).register(subparsers)
    elif argv is None:
        for command in sorted(installed):
            _card(command).register(subparsers)
    elif name is None:
        # No command word: argparse reads the list only to print the help (`--help`, or no
        # command at all), so `fleetscope --version` loads no card (~10 ms, issue 19).
        parser.list_on_help = lambda: _list_commands(subparsers, installed)
    else:  # a name argparse refuses, with the list
        _list_commands(subparsers, installed)
    return parser


class _Parser(argparse.ArgumentParser):
    """fleetscope's parsers: the top level's and, made by its `add_subparsers` (argparse makes a
    subparser of the parent's class), every command's. The top level's command list may wait
    until its help is formatted (`list_on_help`)."""

    list_on_help: Callable[[], None] | None = None

    def format_help(self) -> str:
        if self.list_on_help is not None:
            list_commands, self.list_on_help = self.list_on_help, None
            list_commands()
        return super().format_help()


def _list_commands(subparsers: Any, installed: Iterable[str]) -> None:
    """Every installed command by name with its card's one-line help, not registered."""
    for command in sorted(installed):
        try:
            help_line = plugins.command_help(_card(command))
        except ConfigError as exc:
            help_line = f"(broken plug-in: {exc})"
        subparsers.add_parser(command, help=help_line, add_help=False)


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
    return _require_data(getattr(args, "command", None), settings)


# Commands that read the embedded server's warehouse and catalog from `core.data_dir`.
READS_DATA = frozenset(
    {"opportunities", "job", "findings", "report", "quantiles", "plan", "analyzers", "backfill"}
)


def _require_data(command: str | None, settings: Settings) -> Settings:
    """A reading command pointed at a data folder that does not exist asks the server where its
    data is (`app.server_location`: GET /v1/server at agent.ingest_url) and reads there, or says
    which setting to set, instead of creating an empty `./var` and answering "no GPU samples"
    (issue 31)."""
    if command not in READS_DATA or settings.server.mode != "embedded":
        return settings
    folder = settings.path(settings.core.data_dir)
    if folder.is_dir():
        return settings
    from app import server_location

    asked, said = server_location.follow(settings)
    if asked.path(asked.core.data_dir).is_dir():
        print(f"fleetscope: {said} (GET {server_location.ROUTE}); reading it", file=sys.stderr)
        return asked
    raise ConfigError(
        f"no fleetscope data at {folder.resolve()} (core.data_dir, default ./var) and {said}: "
        "set FLEETSCOPE_CORE_DATA_DIR (or [core] data_dir in the TOML file, --config) to the "
        "folder the server writes (its own FLEETSCOPE_CORE_DATA_DIR), set "
        "FLEETSCOPE_AGENT_INGEST_URL to the server's URL, or start `fleetscope demo` here"
    )


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    try:
        parser = build_parser(words)
    except ConfigError as exc:  # the command run is a plug-in that cannot be loaded
        print(f"fleetscope: error: {exc}", file=sys.stderr)
        return exc.exit_code
    return run(words, parser, follow_demo)


if __name__ == "__main__":
    sys.exit(main())
