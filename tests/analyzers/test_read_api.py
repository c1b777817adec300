"""The read API (analyzers.read_api) on a real server, read with a real HTTP client over loopback.

Catalog (written as the analyzers and the agents' CatalogSync write it):
- jobs: train-a (team ml, cluster c1, 2 GPUs on h1), train-b (team nlp, cluster c2), eval-c
  (team ml, cluster c1);
- findings (GPU-hours, window ending hours ago): f1 R1 train-a 4.0 (1 h), f2 R3 train-a 3.0 (1 h,
  the same window: counted once with f1), f3 R17 critical train-b 1.5 (2 h), f4 R2 eval-c 2.0 (3 h),
  f5 R1 eval-c 9.0 (10 days: outside the default 7 d window), f6 R2 train-a 5.0 acknowledged,
  f7 R5 train-b 6.0 under a suppression (team nlp, rule R5).
Tokens: server.tokens = TEST_TOKEN (the operator's), server.read_tokens = READ_TOKEN, and an
agent's catalog token.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
from openapi_spec_validator import validate

from fleetscope.errors import ConfigError
from fleetscope.settings import load_settings
from simulator.maker.batches import gpu_batch
from simulator.wire import TEST_TOKEN, post_batch
from warehouse.catalog import findings as cat
from warehouse.catalog import fleet, tokens
from warehouse.ingest.runtime import Server

READ_TOKEN = "read-only-token-for-the-tests"
NOW = datetime.now(UTC)
EARLIER = (NOW - timedelta(hours=2, minutes=30)).isoformat().replace("+00:00", "Z")  # in a URL


def finding(fid: str, rule: str, job: str, hours: float, age_h: float, **extra: Any) -> cat.Finding:
    end = NOW - timedelta(hours=age_h)
    start = end - timedelta(hours=1)
    team = {"train-a": "ml", "train-b": "nlp", "eval-c": "ml"}[job]
    host = {"train-a": "h1", "train-b": "h2", "eval-c": "h3"}[job]
    return cat.Finding(
        finding_id=fid, rule_id=rule, severity=extra.pop("severity", "warn"), window_start=start,
        window_end=end, wasted_gpu_hours=hours, job_id=job, team=team,
        user="bo" if job == "train-b" else "ana", host=host,
        gpus=["0"], evidence={"mean_util": 0.0}, recommendation="Release the GPUs.", **extra,
    )  # fmt: skip


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("read-api")
    settings = load_settings(env={}).with_overrides(
        core__data_dir=str(root),
        server__port=0,
        server__tokens=TEST_TOKEN,
        server__read_tokens=f"{READ_TOKEN}, second-read-token",
        server__plugins="analyzers.read_api",
        warehouse__maintenance_interval_s=3600.0,
    )
    running = Server(settings)
    running.start()
    with running.catalog.begin() as conn:
        fleet.upsert_jobs(
            conn,
            [
                fleet.Job("train-a", cluster="c1", team="ml", user="ana", gpus=2),
                fleet.Job("train-b", cluster="c2", team="nlp", user="bo"),
                fleet.Job("eval-c", cluster="c1", team="ml", user="ana"),
            ],
        )
        t0 = NOW - timedelta(hours=5)
        fleet.record_allocations(
            conn,
            [fleet.Allocation("train-a", "h1", i, f"GPU-{i}", None, t0, NOW) for i in (0, 1)],
        )
        cat.upsert_findings(
            conn,
            [
                finding("f1", "R1", "train-a", 4.0, 1),
                finding("f2", "R3", "train-a", 3.0, 1),
                finding("f3", "R17", "train-b", 1.5, 2, severity="critical"),
                finding("f4", "R2", "eval-c", 2.0, 3),
                finding("f5", "R1", "eval-c", 9.0, 240),
                finding("f6", "R2", "train-a", 5.0, 1),
                finding("f7", "R5", "train-b", 6.0, 1),
            ],
            run_id=None,
        )
        cat.set_finding_state(conn, "f6", "acknowledged")
        cat.add_suppression(conn, "team", "nlp", rule_id="R5", reason="known")
        running.agent_token = tokens.create_token(conn, "rack-1")  # type: ignore[attr-defined]
    try:
        yield running
    finally:
        running.stop()


def get(server: Server, path: str, token: str | None = READ_TOKEN) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return requests.get(f"{server.url}{path}", headers=headers, timeout=30)


def ids(answer: requests.Response) -> list[str]:
    assert answer.status_code == 200, answer.text
    return [f["finding_id"] for f in answer.json()["items"]]


def test_findings_are_open_in_the_window_most_wasted_first(server: Server) -> None:
    answer = get(server, "/v1/findings")
    assert answer.headers["Content-Type"] == "application/json"
    assert ids(answer) == ["f1", "f2", "f4", "f3"]  # f5 too old, f6 acked, f7 suppressed
    first = answer.json()["items"][0]
    assert {k: first[k] for k in ("rule_id", "severity", "state", "job_id", "team", "cluster",
                                  "host", "gpus", "wasted_gpu_hours", "evidence")} == {
        "rule_id": "R1", "severity": "warn", "state": "open", "job_id": "train-a", "team": "ml",
        "cluster": "c1", "host": "h1", "gpus": ["0"], "wasted_gpu_hours": 4.0,
        "evidence": {"mean_util": 0.0},
    }  # fmt: skip
    assert first["window_end"].endswith("Z")


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("team=ml", ["f1", "f2", "f4"]),
        ("cluster=c2", ["f3"]),
        ("rule=R1", ["f1"]),
        ("rule=R1&window=30d", ["f5", "f1"]),
        ("window=150m", ["f1", "f2", "f3"]),  # f4's window ended 3 h ago
        ("state=acknowledged", ["f6"]),
        ("state=suppressed", ["f7"]),
        ("state=all&team=nlp", ["f7", "f3"]),
        # [now - 2.5 h - 1 d, now - 2.5 h): f4 ended 3 h ago, f3 ran from 3 h to 2 h ago
        pytest.param(f"end={EARLIER}&window=1d", ["f4", "f3"], id="end=2.5h-ago&window=1d"),
    ],
)
def test_findings_filters(server: Server, query: str, expected: list[str]) -> None:
    assert ids(get(server, f"/v1/findings?{query}")) == expected


def test_findings_are_paged(server: Server) -> None:
    first = get(server, "/v1/findings?limit=3").json()
    assert [f["finding_id"] for f in first["items"]] == ["f1", "f2", "f4"]
    assert (first["total"], first["limit"], first["offset"], first["next_offset"]) == (4, 3, 0, 3)
    rest = get(server, f"/v1/findings?limit=3&offset={first['next_offset']}").json()
    assert [f["finding_id"] for f in rest["items"]] == ["f3"]
    assert rest["next_offset"] is None


def test_opportunities_count_a_job_once(server: Server) -> None:
    answer = get(server, "/v1/opportunities?by=team")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["total_gpu_hours"] == 4.0 + 2.0 + 1.5  # f2 is train-a's same bucket as f1
    assert [(g["key"], g["gpu_hours"]) for g in body["by_group"]] == [("ml", 6.0), ("nlp", 1.5)]
    assert [(r["key"], r["gpu_hours"]) for r in body["by_rule"]] == [
        ("R1", 4.0), ("R3", 3.0), ("R2", 2.0), ("R17", 1.5),
    ]  # fmt: skip
    assert [j["key"] for j in body["top_jobs"]] == ["train-a", "eval-c", "train-b"]
    narrowed = get(server, "/v1/opportunities?cluster=c2&by=user&top=1").json()
    assert [(g["key"], g["gpu_hours"]) for g in narrowed["by_group"]] == [("bo", 1.5)]


def test_a_job_with_its_gpus_findings_and_recoverable_hours(server: Server) -> None:
    answer = get(server, "/v1/jobs/train-a")
    assert answer.status_code == 200, answer.text
    job = answer.json()
    assert {k: job[k] for k in ("job_id", "cluster", "team", "user")} == {
        "job_id": "train-a", "cluster": "c1", "team": "ml", "user": "ana",
    }  # fmt: skip
    assert [(g["host"], g["gpu_index"], g["gpu_uuid"]) for g in job["gpus"]] == [
        ("h1", 0, "GPU-0"), ("h1", 1, "GPU-1"),
    ]  # fmt: skip
    assert [f["finding_id"] for f in job["findings"]] == ["f1", "f2"]
    assert job["recoverable_gpu_hours"] == 4.0
    everything = get(server, "/v1/jobs/train-a?state=all").json()
    assert [f["finding_id"] for f in everything["findings"]] == ["f6", "f1", "f2"]


@pytest.mark.parametrize(
    ("path", "token", "status", "error"),
    [
        ("/v1/jobs/nope", READ_TOKEN, 404, "no job 'nope' in the catalog"),
        ("/v1/findings?teem=ml", READ_TOKEN, 400, "unknown query parameter 'teem'"),
        ("/v1/findings?team=ml&team=nlp", READ_TOKEN, 400, "'team' given more than once"),
        ("/v1/findings?window=soon", READ_TOKEN, 400, "duration 'soon'"),
        ("/v1/findings?limit=0", READ_TOKEN, 400, "limit must be 1-1000, not 0"),
        ("/v1/findings?state=gone", READ_TOKEN, 400, "state must be one of open,"),
        ("/v1/opportunities?by=planet", READ_TOKEN, 400, "by must be one of team,"),
        ("/v1/findings", None, 401, "missing or invalid bearer token"),
        ("/v1/findings", "wrong", 401, "missing or invalid bearer token"),
    ],
)
def test_refusals_are_clear(
    server: Server, path: str, token: str | None, status: int, error: str
) -> None:
    answer = get(server, path, token)
    assert answer.status_code == status
    assert error in answer.json()["error"]


def test_token_kinds(server: Server) -> None:
    assert get(server, "/v1/findings", TEST_TOKEN).status_code == 200  # the operator's
    assert get(server, "/v1/findings", "second-read-token").status_code == 200
    agent = get(server, "/v1/findings", server.agent_token)  # type: ignore[attr-defined]
    assert agent.status_code == 403
    assert "ingest token and cannot read" in agent.json()["error"]
    table = gpu_batch("h9", start_ms=0, timestamps=1, gpus=1, interval_ms=10_000)
    refused = post_batch(server.url, "gpu_samples", table, token=READ_TOKEN)
    assert refused.status == 401  # a read token never writes
    assert get(server, "/metrics").status_code == 200  # Prometheus needs no more than a read token


def test_openapi_document_is_valid_and_matches_the_routes(server: Server) -> None:
    answer = get(server, "/v1/openapi.json", token=None)  # no token: it names no job
    assert answer.status_code == 200
    doc = answer.json()
    validate(doc)
    assert sorted(doc["paths"]) == [
        "/v1/findings", "/v1/jobs/{job_id}", "/v1/jobs/{job_id}/summary", "/v1/openapi.json",
        "/v1/opportunities",
    ]  # fmt: skip
    for path, item in doc["paths"].items():
        served = get(server, path.replace("{job_id}", "train-a"))
        assert served.status_code == 200, path
        declared = {p["name"] for p in item["get"].get("parameters", []) if p["in"] == "query"}
        for name in declared:  # every declared parameter is accepted (a value it takes)
            value = {"state": "all", "by": "job", "end": NOW.isoformat(), "window": "7d"}.get(
                name, "1" if name in ("limit", "top", "offset") else "x"
            )
            accepted = requests.get(
                f"{server.url}{path.replace('{job_id}', 'train-a')}",
                params={name: value},
                headers={"Authorization": f"Bearer {READ_TOKEN}"},
                timeout=30,
            )
            assert accepted.status_code == 200, (path, name, accepted.text)


def test_a_guessable_read_token_is_refused_on_a_public_address(tmp_path: Path) -> None:
    settings = load_settings(env={}).with_overrides(
        core__data_dir=str(tmp_path),
        server__host="0.0.0.0",
        server__port=0,
        server__tokens="a-strong-random-token-of-32-chars-xx",
        server__read_tokens="read",  # short: anyone could guess it and read every finding
    )
    with pytest.raises(ConfigError, match=r"refusing to listen on 0\.0\.0\.0"):
        Server(settings)
