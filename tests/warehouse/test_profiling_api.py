"""The profiling routes over real HTTP on a real server: the whole exchange an agent and a user
have, and every refusal (wrong token, bad arguments, unknown job or request, corrupt and
oversized traces) with its status and message."""

from __future__ import annotations

import gzip
import http.client
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetscope.settings import Settings
from simulator.wire import TEST_TOKEN as TOKEN
from warehouse.ingest.runtime import Server

TRACE = (
    Path(__file__).resolve().parents[1]
    / "data/traces/edge_cases/critical_path_simple_add/critical_path_simple_add.json.gz"
)
LIMIT = 64 * 1024


@pytest.fixture
def profiling_server(settings: Settings) -> Iterator[Server]:
    """A server with no analysis plug-in (analysis is tested in tests/analyzers) and a small
    body limit, so an oversized trace is cheap to send."""
    running = Server(settings.with_overrides(server__plugins="", server__max_body_bytes=LIMIT))
    running.start()
    try:
        yield running
    finally:
        running.stop()


def call(
    server: Server,
    method: str,
    path: str,
    body: bytes | object | None = None,
    *,
    token: str | None = TOKEN,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any]]:
    host, port = server.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    try:
        conn.request(method, path, body=data, headers=sent)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"{}")
    finally:
        conn.close()


def poll(server: Server, host: str, processes: list[dict[str, Any]], **extra: Any) -> Any:
    status, answer = call(
        server, "POST", "/v1/agent/poll", {"host": host, "processes": processes, **extra}
    )
    assert status == 200, answer
    return answer


def test_request_poll_upload_read_back(profiling_server: Server) -> None:
    poll(profiling_server, "node-a", [{"pid": 77, "job_id": "train-9", "rank": 0}])
    status, created = call(profiling_server, "POST", "/v1/profile-requests", {"job_id": "train-9"})
    assert (status, created) == (201, {"id": 1})

    answer = poll(profiling_server, "node-a", [{"pid": 77, "job_id": "train-9", "rank": 0}])
    assert answer == {
        "requests": [
            {"request_id": 1, "job_id": "train-9", "rank": None, "steps": 5,
             "duration_s": None, "pids": [77]}
        ],
        "max_trace_bytes": LIMIT,
    }  # fmt: skip

    body = TRACE.read_bytes()
    status, stored = call(
        profiling_server, "POST", "/v1/traces?request_id=1&host=node-a&rank=0&pid=77", body
    )
    assert status == 201 and stored["trace_id"] == "req1-node-a-pid77"
    assert Path(stored["path"]).read_bytes() == body

    deadline = time.monotonic() + 30
    while (request := call(profiling_server, "GET", "/v1/profile-requests/1")[1])[
        "state"
    ] != "done":
        assert time.monotonic() < deadline, request
        time.sleep(0.05)
    assert request["trace_id"] == "req1-node-a-pid77"
    (entry,) = request["matched"]
    assert isinstance(entry.pop("analysis_renewed_at"), float)  # the claim on its analysis
    assert entry == {
        "host": "node-a", "pid": 77, "rank": 0, "state": "done", "trace_id": "req1-node-a-pid77",
        "analyser": profiling_server.profiling.leases.analyser, "analyses": 1,
    }  # fmt: skip
    assert request["summary"] is None  # no analysis plug-in on this server


def test_every_route_wants_the_token(profiling_server: Server) -> None:
    for method, path in [
        ("POST", "/v1/profile-requests"),
        ("GET", "/v1/profile-requests/1"),
        ("POST", "/v1/agent/poll"),
        ("POST", "/v1/traces?request_id=1&host=a&pid=1"),
    ]:
        for token in (None, "wrong"):
            status, answer = call(profiling_server, method, path, b"{}", token=token)
            assert status == 401, (method, path, answer)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "job_id must be a non-empty string"),
        ({"job_id": ""}, "job_id must be a non-empty string"),
        ({"job_id": "j", "steps": 0}, "steps must be an integer from 1 to 1000, got 0"),
        ({"job_id": "j", "steps": 2.5}, "steps must be an integer from 1 to 1000"),
        ({"job_id": "j", "rank": -1}, "rank must be an integer from 0"),
        ({"job_id": "j", "duration_s": "10"}, "duration_s must be a number of seconds"),
        ({"job_id": "j", "duration_s": 0}, "duration_s must be a number of seconds"),
        ({"job_id": "j", "steps": 5, "duration_s": 2.0}, "give steps or duration_s, not both"),
        ({"job_id": "j", "step": 5}, "unknown fields ['step']"),
        ([], "body must be a JSON object"),
    ],
)
def test_bad_arguments_are_400_naming_the_argument(
    profiling_server: Server, body: object, message: str
) -> None:
    status, answer = call(profiling_server, "POST", "/v1/profile-requests", body)
    assert status == 400
    assert message in answer["error"]


def test_unknown_jobs_and_requests_are_404(profiling_server: Server) -> None:
    status, answer = call(profiling_server, "POST", "/v1/profile-requests", {"job_id": "ghost"})
    assert status == 404
    assert answer["error"] == (
        "unknown job 'ghost': the catalog never saw it and no polling agent reports a process of it"
    )
    assert call(profiling_server, "GET", "/v1/profile-requests/42")[0] == 404
    status, answer = call(
        profiling_server, "POST", "/v1/traces?request_id=42&host=a&pid=1", gzip.compress(b"{}")
    )
    assert (status, answer["error"]) == (404, "no profile request 42")


def running_request(server: Server) -> None:
    poll(server, "node-a", [{"pid": 5, "job_id": "train-9", "rank": 0}])
    assert call(server, "POST", "/v1/profile-requests", {"job_id": "train-9", "steps": 3})[0] == 201
    assert poll(server, "node-a", [{"pid": 5, "job_id": "train-9", "rank": 0}])["requests"]


def test_a_corrupt_trace_is_400_and_fails_the_request(profiling_server: Server) -> None:
    running_request(profiling_server)
    status, answer = call(
        profiling_server, "POST", "/v1/traces?request_id=1&host=node-a&pid=5", b"PK\x03\x04zip"
    )
    assert status == 400
    assert "not a gzip file" in answer["error"]
    request = call(profiling_server, "GET", "/v1/profile-requests/1")[1]
    assert request["state"] == "failed"
    assert request["error"] == (
        "node-a pid 5: the trace from node-a pid 5 is corrupt: not a gzip file "
        "(the body does not start with 1f 8b)"
    )


def test_an_oversized_trace_is_413_and_fails_the_request_with_the_limit(
    profiling_server: Server,
) -> None:
    running_request(profiling_server)
    status, answer = call(
        profiling_server, "POST", "/v1/traces?request_id=1&host=node-a&pid=5", b"x" * (LIMIT + 1)
    )
    assert (status, answer["error"]) == (
        413,
        f"trace of {LIMIT + 1} bytes is over the limit of {LIMIT} bytes",
    )
    request = call(profiling_server, "GET", "/v1/profile-requests/1")[1]
    assert request["state"] == "failed"
    assert (
        f"the trace of {LIMIT + 1} bytes from node-a pid 5 is over the server's limit"
        in (request["error"])
    )


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("host=a&pid=1", "query parameter request_id is required"),
        ("request_id=x&host=a&pid=1", "request_id must be an integer"),
        ("request_id=1&pid=1", "query parameter host is required"),
    ],
)
def test_upload_arguments_are_checked(profiling_server: Server, query: str, message: str) -> None:
    status, answer = call(profiling_server, "POST", f"/v1/traces?{query}", gzip.compress(b"{}"))
    assert (status, message in answer["error"]) == (400, True)


def test_a_poll_must_name_its_host_and_list_processes(profiling_server: Server) -> None:
    status, answer = call(profiling_server, "POST", "/v1/agent/poll", {"processes": []})
    assert (status, answer["error"]) == (
        400,
        "host must be a non-empty string of at most 255 characters",
    )
    status, answer = call(
        profiling_server, "POST", "/v1/agent/poll", {"host": "a", "processes": [{"job_id": "j"}]}
    )
    assert (status, answer["error"]) == (400, "every process needs a pid")
