"""One registry of commands, the entry points of `fleetscope.commands` (fleetscope.plugins):
each card's help is the help its command registers, and the top-level help is built from the
cards alone, importing no stage."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from app.cli import build_parser, commands
from fleetscope import plugins


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str | None]]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [(a.dest, a.help) for a in action._choices_actions]


def _child(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    child: argparse.ArgumentParser = action.choices[name]
    return child


def _cards() -> list[tuple[str, str | None]]:
    return [(name, plugins.command_help(card)) for name, card in commands().items()]


def test_every_card_is_the_command_it_registers_in_name_order() -> None:
    cards = _cards()
    assert [name for name, _ in cards] == sorted(name for name, _ in cards)
    assert _subcommands(build_parser()) == cards


def test_fleetscope_registers_its_own_commands_as_entry_points() -> None:
    own = {n: e.value for n, e in plugins.registered(plugins.COMMANDS).items()}
    assert own["trace"] == "app.commands.trace"
    assert own["import"] == "app.commands.import_"
    assert own["hosts"] == "app.commands.hosts"  # the Hosts, GPUs, Traces pages' (issue 31)
    assert len([v for v in own.values() if v.startswith("app.commands.")]) == 23


def test_running_one_command_puts_only_it_on_the_parser() -> None:
    parser = build_parser(["--config", "x.toml", "trace", "analyze", "t.json"])
    assert _subcommands(parser) == [c for c in _cards() if c[0] == "trace"]
    args = parser.parse_args(["trace", "analyze", "t.json"])
    assert args.paths == ["t.json"]


def test_a_command_name_not_installed_is_refused_with_every_command_listed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = build_parser(["tracee", "analyze"])
    assert _subcommands(parser) == _cards()
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["tracee", "analyze"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'tracee'" in err
    assert all(f"'{name}'" in err for name, _ in _cards())


PROBE = """
import contextlib, io, json, sys
from app.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        main(["--help"])
    except SystemExit:
        pass
stages = ("collector", "simulator", "warehouse", "analyzers", "dashboard")
print(json.dumps({
    "stages": sorted(m for m in sys.modules if m.split(".")[0] in stages),
    "numpy": "numpy" in sys.modules,
    "listed": all(f"    {name} " in out.getvalue() for name in sys.argv[1:]),
}))
"""


def test_top_level_help_lists_every_command_and_imports_no_stage() -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *commands()],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(result.stdout) == {"stages": [], "numpy": False, "listed": True}


VERSION_PROBE = """
import contextlib, io, json, sys
from app.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        main(["--version"])
    except SystemExit as exited:
        code = exited.code
print(json.dumps({
    "printed": out.getvalue(),
    "code": code,
    "cards": sorted(m for m in sys.modules if m.startswith("app.commands.")),
}))
"""


def test_version_loads_no_command_card() -> None:
    """Only a help lists the commands: `fleetscope --version` imports no card."""
    result = subprocess.run(
        [sys.executable, "-c", VERSION_PROBE], capture_output=True, text=True, check=True
    )
    assert json.loads(result.stdout) == {
        "printed": "fleetscope 0.1.0\n",
        "code": 0,
        "cards": [],
    }


def test_a_bare_command_line_prints_the_help_with_every_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from app.cli import main

    assert main([]) == 2
    out = capsys.readouterr().out
    assert all(f"    {name} " in out for name, _ in _cards())
