"""The warehouse's commands through the real `fleetscope` entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from fleetscope.settings import Settings
from simulator.maker.batches import gpu_batch
from simulator.wire import post_batch
from warehouse.ingest.runtime import Server


@pytest.fixture
def env_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = tmp_path / "data"
    monkeypatch.setenv("FLEETSCOPE_CORE_DATA_DIR", str(data))
    monkeypatch.setenv("FLEETSCOPE_SERVER_TOKENS", "")
    return data


def test_a_created_token_authenticates_until_revoked(
    env_config: Path, capsys: pytest.CaptureFixture[str], settings: Settings
) -> None:
    assert main(["token", "create", "rack-1"]) == 0
    token = capsys.readouterr().out.strip()
    assert len(token) >= 40
    server = Server(settings.with_overrides(core__data_dir=str(env_config), server__tokens=""))
    server.start()
    try:
        assert post_batch(server.url, "gpu_samples", gpu_batch("n"), token=token).status == 202
        assert main(["token", "revoke", "rack-1"]) == 0
        assert main(["token", "list"]) == 0
        assert "rack-1" in capsys.readouterr().out
        server.auth.clear()
        assert post_batch(server.url, "gpu_samples", gpu_batch("n"), token=token).status == 401
        server.writer.flush_log_now()  # the first batch, acknowledged from the ingest log
        assert (
            main(
                ["warehouse", "query", "SELECT count(*) AS n FROM gpu_samples", "--format", "json"]
            )
            == 0
        )
        assert json.loads(capsys.readouterr().out) == [{"n": "80"}]
    finally:
        server.stop()


def test_user_mistakes_are_messages_not_tracebacks(
    env_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["token", "revoke", "nobody"]) == 6
    assert capsys.readouterr().err == "fleetscope: error: no active token named 'nobody'\n"
    assert main(["warehouse", "query", "SELECT * FROM nowhere"]) == 2
    assert "query failed: Catalog Error" in capsys.readouterr().err
    assert main(["warehouse", "migrate"]) == 0
    assert "schema versions [1, 2, 3, 4]" in capsys.readouterr().out
