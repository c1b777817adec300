"""The CLI finds a running demo by itself (app.demo_discovery), and only a running one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app import demo_discovery
from app.cli import main
from app.supervise import free_port
from fleetscope.settings import load_settings


def _demo(tmp_path: Path, pid: int) -> demo_discovery.RunningDemo:
    return demo_discovery.RunningDemo(
        pid=pid,
        data_dir=str(tmp_path / "demo" / "data"),
        ingest_url="http://127.0.0.1:18000",
        token="demo-secret",
        dashboard_url="http://127.0.0.1:18501",
    )


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_running_demo_supplies_data_dir_ingest_url_and_token(tmp_path: Path) -> None:
    settings = load_settings(env={"FLEETSCOPE_CORE_DATA_DIR": str(tmp_path / "var")})
    demo = _demo(tmp_path, os.getpid())
    demo_discovery.announce(demo_discovery.discovery_file(settings), demo)
    assert (tmp_path / "var" / "demo.json").stat().st_mode & 0o777 == 0o600

    followed, found = demo_discovery.follow(settings)

    assert found == demo
    assert followed.core.data_dir == str(tmp_path / "demo" / "data")
    assert followed.agent.ingest_url == "http://127.0.0.1:18000"
    assert followed.agent.token == "demo-secret"


def test_what_the_user_set_wins_over_the_demo(tmp_path: Path) -> None:
    env = {"FLEETSCOPE_CORE_DATA_DIR": str(tmp_path / "var"), "FLEETSCOPE_AGENT_TOKEN": "mine"}
    settings = load_settings(env=env)
    demo_discovery.announce(demo_discovery.discovery_file(settings), _demo(tmp_path, os.getpid()))

    followed, _ = demo_discovery.follow(settings)

    assert followed.agent.token == "mine"
    assert followed.core.data_dir == str(tmp_path / "demo" / "data")


def test_a_file_left_by_a_dead_demo_is_ignored(tmp_path: Path) -> None:
    settings = load_settings(env={"FLEETSCOPE_CORE_DATA_DIR": str(tmp_path / "var")})
    demo_discovery.announce(demo_discovery.discovery_file(settings), _demo(tmp_path, _dead_pid()))

    followed, found = demo_discovery.follow(settings)

    assert found is None
    assert followed.core.data_dir == str(tmp_path / "var")


def test_withdraw_removes_only_its_own_announcement(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    demo_discovery.announce(path, _demo(tmp_path, os.getpid()))
    demo_discovery.withdraw(path, os.getpid() + 1)
    assert path.exists()
    demo_discovery.withdraw(path, os.getpid())
    assert not path.exists()


def test_the_cli_says_it_reads_the_demo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FLEETSCOPE_CONFIG", os.devnull)
    monkeypatch.setenv("FLEETSCOPE_CORE_DATA_DIR", str(tmp_path / "var"))
    demo = _demo(tmp_path, os.getpid())
    demo_discovery.announce(tmp_path / "var" / "demo.json", demo)

    assert main(["config", "show"]) == 0

    out, err = capsys.readouterr()
    assert f"reading the running demo (pid {os.getpid()}) at {demo.data_dir}" in err
    assert "demo-secret" in out


@pytest.mark.parametrize("command", [["opportunities", "--window", "1h"], ["job", "j1"],
                                     ["report", "weekly", "--no-pdf"]])  # fmt: skip
def test_without_the_servers_data_folder_the_cli_names_the_setting_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    command: list[str],
) -> None:  # fmt: skip
    """Issue 31: no `./var` appears, and the error says which setting points at the data."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLEETSCOPE_CORE_DATA_DIR", raising=False)
    monkeypatch.setenv("FLEETSCOPE_CONFIG", os.devnull)
    # no server to ask where the data is (tests/test_server_location.py asks one)
    monkeypatch.setenv("FLEETSCOPE_AGENT_INGEST_URL", f"http://127.0.0.1:{free_port()}")
    assert main(command) == 2
    error = capsys.readouterr().err
    assert f"no fleetscope data at {tmp_path / 'var'} (core.data_dir, default ./var)" in error
    assert "FLEETSCOPE_CORE_DATA_DIR" in error
    assert list(tmp_path.iterdir()) == []
