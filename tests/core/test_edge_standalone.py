"""A standalone command (`set_defaults(standalone=fn)`: a file tool such as `fleetscope trace
analyze`) runs without the settings load, and its errors become one line and the error's exit
code at the edge, like every other command's (fleetscope.edge). It runs as any code does: no
paused garbage collector, no early process exit (issue 29 removed those start-up tricks)."""

from __future__ import annotations

import argparse
import gc

import pytest

from fleetscope.edge import run
from fleetscope.errors import ConfigError


def _parser(standalone: object) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tool")
    parser.add_argument("--config")
    parser.set_defaults(standalone=standalone)
    return parser


def test_a_standalone_command_reads_no_settings_and_returns_its_code() -> None:
    seen: list[bool] = []

    def command(args: argparse.Namespace) -> int:
        seen.append(gc.isenabled())
        return 3

    # A settings file that does not exist would fail the settings load: it is never read.
    assert run(["--config", "/nonexistent/fleetscope.toml"], _parser(command)) == 3
    assert seen == [True]


def test_a_standalone_failure_is_one_line_and_its_exit_code(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def failing(args: argparse.Namespace) -> int:
        raise ConfigError("no such trace")

    assert run([], _parser(failing)) == ConfigError.exit_code
    assert capsys.readouterr().err == "tool: error: no such trace\n"
