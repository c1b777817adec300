"""`fleetscope profile` against a real server on loopback: each user mistake is one line and its
exit code, the wait gives up at --timeout with what it knows, and the table says what happened.
(The whole path with an agent and a training process: tests/e2e/test_profile_e2e.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.profile_cli import render_request, wait
from app.supervise import free_port
from fleetscope.errors import ProfileFailedError
from fleetscope.settings import load_settings
from warehouse.ingest.runtime import Server

TOKEN = "cli-token"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    settings = load_settings(env={}).with_overrides(
        core__data_dir=str(tmp_path / "data"), server__port=0, server__tokens=TOKEN,
        server__plugins="", warehouse__maintenance_interval_s=3600.0,
    )  # fmt: skip
    running = Server(settings)
    running.start()
    yield running
    running.stop()


def profile(server_url: str, *args: str, token: str = TOKEN) -> list[str]:
    return ["profile", "--server", server_url, "--token", token, *args]


@pytest.mark.parametrize(
    ("args", "token", "code", "message"),
    [
        (["--job", "ghost", "--steps", "5"], TOKEN, 6, "unknown job 'ghost'"),
        (["--job", "ghost", "--steps", "5"], "wrong", 5, "the server refused the token"),
        (["--job", "j", "--steps", "5000"], TOKEN, 2, "steps must be an integer from 1 to 1000"),
        (["--job", "j", "--rank", "-1", "--steps", "5"], TOKEN, 2, "--rank must be >= 0"),
    ],
)
def test_mistakes_are_one_line_and_an_exit_code(
    server: Server,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    token: str,
    code: int,
    message: str,
) -> None:
    assert main(profile(server.url, *args, token=token)) == code
    err = capsys.readouterr().err
    assert err.startswith("fleetscope: error: ") and message in err
    assert "Traceback" not in err


def test_no_server_is_exit_7_naming_the_url(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    assert main(profile(url, "--job", "j", "--steps", "5")) == 7
    assert f"cannot reach the fleetscope server at {url}" in capsys.readouterr().err


def test_the_wait_gives_up_at_the_timeout_with_what_was_matched() -> None:
    now = [0.0]
    request: dict[str, Any] = {
        "state": "running",
        "matched": [{"host": "node-a", "pid": 9, "rank": 0, "state": "running"}],
    }
    announced: list[dict[str, Any]] = []

    def sleep(seconds: float) -> None:
        now[0] += seconds

    with pytest.raises(ProfileFailedError) as raised:
        wait(lambda _id: request, 4, 3.0, on_match=announced.append, clock=lambda: now[0],
             sleep=sleep)  # fmt: skip
    assert str(raised.value) == (
        "profile request 4 is still running after 3 s (matched: node-a pid 9 rank 0); the server "
        "keeps it, ask again with GET /v1/profile-requests/4"
    )
    assert announced == [request]  # said once, not at every read


def test_the_table_shows_headline_findings_and_unanalyzed_traces() -> None:
    finding = {"rule_id": "T8", "severity": "critical", "wasted_gpu_hours": 12.5,
               "title": "rank 0: data-loader bound: 41% of step time waiting for the next batch",
               "recommendation": "raise DataLoader(num_workers=...)"}  # fmt: skip
    summary = {"headline": {"0": {"steps": 5.0, "mean_step_ms": 42.25, "dataloader_share": 0.41}},
               "findings": [finding]}  # fmt: skip
    text = render_request(
        {
            "id": 3, "job_id": "j", "state": "done", "error": None,
            "matched": [{"host": "a", "pid": 1, "rank": 0}, {"host": "b", "pid": 2, "rank": 1}],
            "traces": [
                {"trace_id": "req3-a-pid1", "host": "a", "pid": 1, "path": "/t/1", "state": "done",
                 "summary": summary},
                {"trace_id": "req3-b-pid2", "host": "b", "pid": 2, "path": "/t/2", "state": "done",
                 "summary": None},
            ],
        }
    )  # fmt: skip
    assert text.splitlines() == [
        "profile request 3 for job j: done",
        "matched: a pid 1 rank 0, b pid 2 rank 1",
        "",
        "trace req3-a-pid1 (a pid 1): /t/1",
        "  rank 0: 5 steps, mean step 42.2 ms, data loader 41% of step time",
        "  findings (1):",
        "  [T8 critical] rank 0: data-loader bound: 41% of step time waiting for the next batch"
        "  (~12.5 GPU-h/week)",
        "      fix: raise DataLoader(num_workers=...)",
        "",
        "trace req3-b-pid2 (b pid 2): /t/2",
        "  not analyzed (the server runs no trace analysis: add analyzers.traces.service to "
        "server.plugins)",
    ]
