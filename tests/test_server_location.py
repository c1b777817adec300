"""The CLI finds the server's data (issue 31): a reading command whose core.data_dir is not there
asks the server at agent.ingest_url (`GET /v1/server`) where its data is and reads it there; when
no server answers, it names the settings to set. Neither creates a `./var`. Real server on a free
loopback port, real CLI entry point."""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli import main
from app.supervise import free_port
from fleetscope.settings import load_settings
from simulator.wire import TEST_TOKEN
from warehouse.ingest.runtime import Server


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    settings = load_settings(env={}).with_overrides(
        core__data_dir=str(tmp_path / "server-data"),
        server__port=0,
        server__tokens=TEST_TOKEN,
        warehouse__flush_interval_s=0.02,
        warehouse__maintenance_interval_s=3600.0,
        server__plugins="",
    )
    running = Server(settings)
    running.start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh folder with no settings: the newcomer's second shell."""
    folder = tmp_path / "shell"
    folder.mkdir()
    monkeypatch.chdir(folder)
    monkeypatch.delenv("FLEETSCOPE_CORE_DATA_DIR", raising=False)
    monkeypatch.delenv("FLEETSCOPE_WAREHOUSE_SEGMENTS_DIR", raising=False)
    monkeypatch.setenv("FLEETSCOPE_CONFIG", os.devnull)
    return folder


def test_the_server_says_where_its_data_is_without_a_token(server: Server, tmp_path: Path) -> None:
    with urllib.request.urlopen(server.url + "/v1/server", timeout=30) as answer:
        said = json.loads(answer.read())
    assert said == {
        "settings": {
            "server.mode": "embedded",
            "core.data_dir": str((tmp_path / "server-data").resolve()),
            "warehouse.segments_dir": "",
            "analyzers.sketches_dir": "",
        }
    }


def test_the_cli_reads_the_data_of_the_server_it_ships_to(
    server: Server, elsewhere: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.setenv("FLEETSCOPE_AGENT_INGEST_URL", server.url)
    assert main(["opportunities", "--window", "1h", "--json"]) == 0
    out, err = capsys.readouterr()
    data_dir = (tmp_path / "server-data").resolve()
    assert f"the server at {server.url} keeps its data at {data_dir} (GET /v1/server)" in err
    assert json.loads(out)["by_rule"] == []  # the server's (empty) catalog, read
    assert list(elsewhere.iterdir()) == []


def test_with_no_server_answering_the_cli_names_the_settings(
    elsewhere: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("FLEETSCOPE_AGENT_INGEST_URL", nobody)
    assert main(["job", "j1"]) == 2
    error = capsys.readouterr().err
    assert f"no fleetscope data at {elsewhere / 'var'} (core.data_dir, default ./var)" in error
    assert f"no fleetscope server answered at {nobody} (agent.ingest_url)" in error
    assert "FLEETSCOPE_CORE_DATA_DIR" in error and "FLEETSCOPE_AGENT_INGEST_URL" in error
    assert list(elsewhere.iterdir()) == []
