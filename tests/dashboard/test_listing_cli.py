"""`fleetscope hosts`, `fleetscope gpus` and `fleetscope traces` as a person reads them: a table
with the headline first, and a host that sent nothing named as such (exit 6), never an empty
table. Real CLI entry point, real test warehouse (the headline numbers against the pages:
test_headlines_match_cli)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.cli import main
from tests.dashboard.conftest import Warehouse


def test_hosts_prints_the_headline_then_the_nodes_and_their_health(
    warehouse_env: Warehouse, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["hosts"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("window ") and lines[0].endswith(" UTC")
    assert lines[1] == "hosts: 3  hosts with xid: 1  new ecc dbe: 2  hosts throttling: 0"
    assert "\nnodes\n" in out and "\nhealth\n" in out
    assert "GPU active %" in out and "None" not in out


def test_gpus_names_a_host_without_samples(
    warehouse_env: Warehouse, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["gpus", "--host", "nowhere"]) == 6
    err = capsys.readouterr().err
    assert "no GPU samples from host(s) nowhere" in err and "hosts seen: e1, e2, w1" in err


def test_traces_lists_each_trace_with_its_job(
    warehouse_env: Warehouse, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["traces", "--job", "stall-1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("traces: 1  jobs: 1")
    assert "stall-1/mi250" in out


@pytest.mark.parametrize("command", ["hosts", "gpus"])
def test_a_bad_window_is_named_before_the_warehouse_is_read(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """On an empty warehouse `--window banana` is still the user's first thing to fix."""
    monkeypatch.setenv("FLEETSCOPE_CONFIG", os.devnull)
    monkeypatch.setenv("FLEETSCOPE_CORE_DATA_DIR", str(tmp_path))
    assert main([command]) == 6
    assert "no GPU samples yet" in capsys.readouterr().err
    assert main([command, "--window", "banana"]) == 2
    err = capsys.readouterr().err
    assert "duration 'banana'" in err and "no GPU samples" not in err
