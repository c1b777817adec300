"""A standalone command (`set_defaults(standalone=fn)`: a file tool, one short run) runs with the
cyclic garbage collector paused, and a caller that goes on gets the collector back, whatever
the command returned or raised (fleetscope.edge)."""

from __future__ import annotations

import argparse
import gc

import pytest

from fleetscope.edge import run
from fleetscope.errors import ConfigError


def _parser(standalone: object) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tool")
    parser.set_defaults(standalone=standalone)
    return parser


def test_a_standalone_command_runs_with_the_collector_paused_and_gives_it_back() -> None:
    seen: list[bool] = []

    def command(args: argparse.Namespace) -> int:
        seen.append(gc.isenabled())
        return 0

    assert gc.isenabled()
    assert run([], _parser(command)) == 0
    assert seen == [False]
    assert gc.isenabled()


def test_the_collector_comes_back_after_a_failure(capsys: pytest.CaptureFixture[str]) -> None:
    def failing(args: argparse.Namespace) -> int:
        raise ConfigError("no such trace")

    assert run([], _parser(failing)) == ConfigError.exit_code
    assert capsys.readouterr().err == "tool: error: no such trace\n"
    assert gc.isenabled()
    assert run([], _parser(lambda args: 3)) == 3
    assert gc.isenabled()


def test_a_collector_paused_by_the_caller_stays_paused() -> None:
    gc.disable()
    try:
        assert run([], _parser(lambda args: 0)) == 0
        assert not gc.isenabled()
    finally:
        gc.enable()
