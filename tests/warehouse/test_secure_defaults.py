"""Secure by default: guessable tokens stay on loopback, a first start makes a real token, TLS is
served natively and verified by the agent's transport, and job reads follow server.read_auth."""

from __future__ import annotations

import http.client
import json
import re
import stat
from pathlib import Path

import pytest

from app.cli import main
from collector.http import KeepAliveTransport, UrllibTransport
from fleetscope.contract import to_ipc
from fleetscope.errors import ConfigError, SourceUnavailableError
from fleetscope.settings import Settings
from simulator.maker.batches import gpu_batch
from simulator.wire import TEST_TOKEN, headers_for, post_batch
from warehouse.ingest.runtime import Server
from warehouse.ingest.security import check_exposure, server_token, token_bits, token_path
from warehouse.profiling.trace_files import trace_id_for

TLS = Path(__file__).resolve().parents[1] / "data" / "tls"  # self-signed for 127.0.0.1


@pytest.mark.parametrize(
    "tokens",
    [
        "dev-token",
        "demo-token",
        "short-secret",
        "x,dev-token",
        "aaaaaaaaaaaaaaaa",
        "changemechangeme",
        "0000000000000000",
        "abcd" * 16,
        "7898ea48a1b367856e61e9392d65f06f,changemechangeme",
    ],
)
def test_a_non_loopback_server_refuses_a_guessable_token(settings: Settings, tokens: str) -> None:
    with pytest.raises(ConfigError, match=r"refusing to listen on 0\.0\.0\.0 with a guessable"):
        Server(settings.with_overrides(server__tokens=tokens), host="0.0.0.0")


@pytest.mark.parametrize(
    ("token", "low", "high"),
    [
        ("aaaaaaaaaaaaaaaa", 0, 0),
        ("changemechangeme", 20, 25),  # "changeme" once: 8 characters, 6 distinct
        ("7898ea48a1b367856e61e9392d65f06f", 110, 128),  # openssl rand -hex 16
        ("X8jW1YP2SGakiTghKcbf3XwMxmU_rngo5MouUM_u-cg", 200, 260),  # secrets.token_urlsafe(32)
    ],
)
def test_token_strength_is_estimated_in_bits(token: str, low: int, high: int) -> None:
    assert low <= token_bits(token) <= high


def test_a_random_token_is_accepted_off_loopback(settings: Settings) -> None:
    check_exposure("0.0.0.0", ["443a951d6800c64a65c74b604770a4d87cc6b6006b650a6d3e460023a6c5e78d"])


def test_the_cli_says_why_it_will_not_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FLEETSCOPE_CORE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("FLEETSCOPE_SERVER_TOKENS", "dev-token")
    monkeypatch.setenv("FLEETSCOPE_SERVER_PLUGINS", "")
    assert main(["server", "--host", "0.0.0.0", "--port", "0"]) == 2
    assert "refusing to listen on 0.0.0.0" in capsys.readouterr().err


def test_loopback_keeps_working_with_a_development_token(settings: Settings) -> None:
    server = Server(settings.with_overrides(server__tokens="dev-token"), host="127.0.0.1")
    server.start()
    try:
        assert (
            post_batch(server.url, "gpu_samples", gpu_batch("n"), token="dev-token").status == 202
        )
    finally:
        server.stop()


def test_a_first_start_generates_a_private_token_and_says_where(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = settings.with_overrides(server__tokens="")
    server = Server(plain, host="0.0.0.0")  # a generated token is not guessable: allowed
    path = token_path(plain)
    assert f"generated a random ingest token in {path} (mode 0600)" in capsys.readouterr().err
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    token = server_token(plain)
    assert len(token) >= 40 and token == path.read_text().strip()
    server.start()
    try:
        url = server.url.replace("0.0.0.0", "127.0.0.1")
        assert post_batch(url, "gpu_samples", gpu_batch("n"), token=token).status == 202
        assert post_batch(url, "gpu_samples", gpu_batch("n"), token="dev-token").status == 401
    finally:
        server.stop()
    second = Server(plain)  # a second start reuses the token and says nothing
    second.start()
    second.stop()
    assert server_token(plain) == token and capsys.readouterr().err == ""


def test_tls_is_served_and_the_agent_verifies_it(settings: Settings) -> None:
    server = Server(
        settings.with_overrides(
            server__tls_cert_file=str(TLS / "ingest-cert.pem"),
            server__tls_key_file=str(TLS / "ingest-key.pem"),
        )
    )
    server.start()
    try:
        assert server.url.startswith("https://127.0.0.1:")
        url = f"{server.url}/v1/batches/gpu_samples"
        body, headers = to_ipc(gpu_batch("tls")), headers_for("tls-1", TEST_TOKEN)
        trusting = KeepAliveTransport(ca_file=str(TLS / "ingest-cert.pem"))
        answer = trusting.request("POST", url, body=body, headers=headers, timeout_s=30)
        trusting.close()
        assert (answer.status, json.loads(answer.body)["rows"]) == (202, 80)
        with pytest.raises(SourceUnavailableError, match="CERTIFICATE_VERIFY_FAILED"):
            UrllibTransport().request("POST", url, body=body, headers=headers, timeout_s=30)
        host, port = server.url.removeprefix("https://").split(":")
        plain = http.client.HTTPConnection(host, int(port), timeout=30)
        with pytest.raises((ConnectionError, http.client.HTTPException)):
            plain.request("GET", "/healthz")  # plain HTTP to a TLS port gets no answer
            plain.getresponse()
        plain.close()
        assert server.writer.stats.batches_committed == 1
    finally:
        server.stop()


def test_tls_needs_both_files(settings: Settings) -> None:
    with pytest.raises(ConfigError, match="must be set together"):
        Server(settings.with_overrides(server__tls_cert_file=str(TLS / "ingest-cert.pem")))


@pytest.mark.parametrize(("read_auth", "status"), [(True, 401), (False, 404)])
def test_reads_of_job_data_need_a_token_when_read_auth_is_on(
    settings: Settings, read_auth: bool, status: int
) -> None:
    server = Server(settings.with_overrides(server__read_auth=read_auth))
    server.start()
    try:
        host, port = server.url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        conn.request("GET", "/v1/profile-requests/7")
        assert conn.getresponse().status == status
        conn.close()
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        conn.request("POST", "/v1/jobs", body=b"[]")  # a write always needs one
        assert conn.getresponse().status == 401
        conn.close()
    finally:
        server.stop()


def _get(url: str, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("GET", path, headers=headers)
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


# What the findings plug-in puts on /metrics: job and team names, so job data under read_auth.
JOB_FAMILIES = (
    "# TYPE fleetscope_recoverable_gpu_seconds gauge",
    "# TYPE fleetscope_job_gpu_efficiency_ratio gauge",
    "# TYPE fleetscope_writer_rows_total counter",
)


def test_metrics_name_jobs_so_they_need_a_token_when_read_auth_is_on(settings: Settings) -> None:
    server = Server(settings.with_overrides(server__plugins="analyzers.prometheus_export"))
    server.start()
    try:
        assert _get(server.url, "/metrics", {}) == (
            401,
            b'{"error": "missing bearer token: send \'Authorization: Bearer <token>\'"}',
        )
        assert _get(server.url, "/metrics", {"Authorization": "Bearer nope"}) == (
            401,
            b'{"error": "invalid or revoked bearer token"}',
        )
        status, text = _get(server.url, "/metrics", {"Authorization": f"Bearer {TEST_TOKEN}"})
        assert status == 200
        assert [family for family in JOB_FAMILIES if family not in text.decode()] == []
        assert _get(server.url, "/healthz", {})[0] == 200  # liveness names no job: stays open
    finally:
        server.stop()


def test_metrics_are_open_when_read_auth_is_off(settings: Settings) -> None:
    server = Server(
        settings.with_overrides(
            server__plugins="analyzers.prometheus_export", server__read_auth=False
        )
    )
    server.start()
    try:
        status, text = _get(server.url, "/metrics", {})
        assert status == 200
        assert [family for family in JOB_FAMILIES if family not in text.decode()] == []
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/jobs", b"[" * 100_000),  # was a RecursionError answered 500
        ("/v1/jobs", b"[" * 33 + b"]" * 33),
        ("/v1/agent/poll", b'{"a":' * 40 + b"1" + b"}" * 40),
    ],
)
def test_deep_json_is_a_400_and_the_server_goes_on(server: Server, path: str, body: bytes) -> None:
    host, port = server.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("POST", path, body=body, headers={"Authorization": f"Bearer {TEST_TOKEN}"})
    answer = conn.getresponse()
    assert (answer.status, json.loads(answer.read())) == (
        400,
        {"error": "body is JSON nested deeper than 32 levels"},
    )
    conn.close()
    assert post_batch(server.url, "gpu_samples", gpu_batch("n"), token=TEST_TOKEN).status == 202


@pytest.mark.parametrize(
    "path",
    [
        "/v1/batches/gpu_samples",
        "/v1/jobs",
        "/api/v1/write",
        "/v1/profile-requests",
        "/v1/agent/poll",
        "/v1/traces?request_id=1&host=h&pid=1",
    ],
)
def test_every_write_needs_a_token(server: Server, path: str) -> None:
    host, port = server.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("POST", path, body=b"{}", headers={"Authorization": "Bearer dev-token"})
    answer = conn.getresponse()
    assert (answer.status, json.loads(answer.read())) == (
        401,
        {"error": "invalid or revoked bearer token"},
    )
    conn.close()


@pytest.mark.parametrize(
    ("host_a", "host_b"),
    [("node/1", "node_1"), ("n" * 100 + "-a", "n" * 100 + "-b"), ("node 1", "node_1")],
)
def test_trace_ids_of_different_hosts_never_collide(host_a: str, host_b: str) -> None:
    first, second = trace_id_for(3, host_a, 7), trace_id_for(3, host_b, 7)
    assert first != second
    assert all(re.fullmatch(r"[A-Za-z0-9._~-]+", i) and len(i) < 200 for i in (first, second))
    assert trace_id_for(3, host_a, 7) == first  # stable: a retried upload finds its trace


def test_a_plain_host_keeps_its_readable_trace_id() -> None:
    assert trace_id_for(1, "node-a", 10) == "req1-node-a-pid10"
