"""One registry of commands (app.commands): its lines are what the modules register, and the
top-level help is built from it alone, importing no stage."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from app.cli import build_parser
from app.commands import COMMANDS


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str | None]]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [(a.dest, a.help) for a in action._choices_actions]


def test_registry_lines_are_the_registered_commands_in_order() -> None:
    assert _subcommands(build_parser()) == [(c.name, c.help) for c in COMMANDS]


def test_running_one_command_imports_only_its_module() -> None:
    parser = build_parser(["--config", "x.toml", "trace", "analyze", "t.json"])
    assert _subcommands(parser) == [(c.name, c.help) for c in COMMANDS]
    args = parser.parse_args(["trace", "analyze", "t.json"])
    assert args.paths == ["t.json"]


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
        [sys.executable, "-c", PROBE, *(c.name for c in COMMANDS)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(result.stdout) == {"stages": [], "numpy": False, "listed": True}
