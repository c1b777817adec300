"""Ingest over real HTTP into a real DuckDB file: round trip, every refusal, dedup, jobs, metrics."""

from __future__ import annotations

import http.client
import json
import urllib.request
from collections.abc import Callable

import pyarrow as pa
import pytest
from prometheus_client.parser import text_string_to_metric_families

from fleetscope.contract import (
    ARROW_STREAM_MEDIA_TYPE,
    HEADER_SCHEMA_VERSION,
    SCHEMA_VERSION,
    to_ipc,
)
from fleetscope.settings import Settings
from simulator.maker.batches import EPOCH_MS, gpu_batch, host_batch
from simulator.wire import TEST_TOKEN as TOKEN
from simulator.wire import Answer, headers_for, post, post_batch
from warehouse.catalog import fleet
from warehouse.ingest.runtime import Server
from warehouse.read import reader


def raw_post(url: str, path: str, body: bytes, headers: dict[str, str]) -> Answer:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        return post(conn, path, body, headers)
    finally:
        conn.close()


def stored(server: Server) -> tuple[int, int]:
    """(gpu_samples rows in DuckDB, rows visible through the segments) once the ingest log that
    acknowledged them is flushed."""
    server.writer.flush_log_now()
    in_db = server.warehouse.cursor().execute("SELECT count(*) FROM gpu_samples").fetchall()
    in_segments = (
        reader.connect(server.settings).execute("SELECT count(*) FROM gpu_samples").fetchall()
    )
    return int(in_db[0][0]), int(in_segments[0][0])


def test_round_trip_keeps_every_value_and_unknown_fields(server: Server) -> None:
    batch = gpu_batch("node-a", timestamps=5, gpus=8)
    answer = post_batch(
        server.url, "gpu_samples", batch, token=TOKEN, batch_id="b-1", agent="node-a"
    )
    assert (answer.status, answer.body) == (
        202,
        {"batch_id": "b-1", "rows": 40, "duplicate": False},
    )
    server.writer.flush_log_now()
    back = (
        reader.connect(server.settings)
        .sql("SELECT * FROM gpu_samples ORDER BY ts, gpu_index")
        .to_arrow_table()
    )
    assert back.num_rows == 40
    for name in ("host", "gpu_index", "gpu_util", "fb_used_mib", "job_id"):
        assert back.column(name).to_pylist() == batch.column(name).to_pylist(), name
    assert back.column("extra").to_pylist() == batch.column("extra").to_pylist()
    assert stored(server) == (40, 40)


def test_host_samples_and_a_missing_nullable_column_are_accepted(server: Server) -> None:
    batch = host_batch("node-a", timestamps=3).drop_columns(["load1"])
    answer = post_batch(server.url, "host_samples", batch, token=TOKEN)
    assert answer.status == 202
    server.writer.flush_log_now()
    rows = reader.connect(server.settings).execute(
        "SELECT count(*), count(load1) FROM host_samples"
    )
    assert rows.fetchall() == [(3, 0)]


def _body_with(column: str, values: pa.Array) -> bytes:
    batch = gpu_batch("node-x", timestamps=1, gpus=2)
    return to_ipc(batch.append_column(column, values))


BAD_REQUESTS: dict[str, tuple[Callable[[dict[str, str]], tuple[str, bytes]], int, str]] = {
    "garbage body": (
        lambda h: ("/v1/batches/gpu_samples", b"\x00not arrow at all"),
        400,
        "body is not an Arrow IPC stream",
    ),
    "unknown table": (
        lambda h: ("/v1/batches/gpu_metrics", to_ipc(gpu_batch("n", timestamps=1))),
        404,
        "unknown table 'gpu_metrics'; expected one of ['gpu_samples', 'host_samples', 'step_samples']",
    ),
    "unknown column": (
        lambda h: ("/v1/batches/gpu_samples", _body_with("gpu_mood", pa.array([1.0, 2.0]))),
        400,
        "gpu_samples: unknown columns ['gpu_mood']",
    ),
    "required column missing": (
        lambda h: (
            "/v1/batches/gpu_samples",
            to_ipc(gpu_batch("n", timestamps=1).drop_columns(["gpu_index"])),
        ),
        400,
        "gpu_samples: required column 'gpu_index' is missing",
    ),
    "column of the wrong type": (
        lambda h: (
            "/v1/batches/gpu_samples",
            to_ipc(
                gpu_batch("n", timestamps=1, gpus=1).set_column(13, "gpu_util", pa.array(["high"]))
            ),
        ),
        400,
        "gpu_samples.gpu_util: cannot read string as double",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_REQUESTS))
def test_bad_body_is_refused_with_the_reason_and_nothing_changes(server: Server, case: str) -> None:
    assert post_batch(server.url, "gpu_samples", gpu_batch("before"), token=TOKEN).status == 202
    make, status, message = BAD_REQUESTS[case]
    path, body = make({})
    answer = raw_post(server.url, path, body, headers_for("bad-1", TOKEN))
    assert answer.status == status
    assert str(answer.body["error"]).startswith(message)
    after = gpu_batch("after", start_ms=EPOCH_MS + 60_000)
    assert post_batch(server.url, "gpu_samples", after, token=TOKEN).status == 202
    assert stored(server) == (160, 160)


ENVELOPE_CASES: dict[str, tuple[dict[str, str], int, str]] = {
    "no token": ({"Authorization": ""}, 401, "missing bearer token"),
    "wrong token": ({"Authorization": "Bearer nope"}, 401, "invalid or revoked bearer token"),
    "wrong content type": (
        {"Content-Type": "application/json"},
        415,
        f"Content-Type must be {ARROW_STREAM_MEDIA_TYPE}, got 'application/json'",
    ),
    "unknown schema version": (
        {HEADER_SCHEMA_VERSION: str(SCHEMA_VERSION + 1)},
        422,
        f"schema version {SCHEMA_VERSION + 1} is not one this server reads",
    ),
    "schema version not a number": (
        {HEADER_SCHEMA_VERSION: "v1"},
        400,
        "X-Fleetscope-Schema-Version must be an integer, got 'v1'",
    ),
    "bad batch id": (
        {"X-Fleetscope-Batch-Id": "../etc/passwd"},
        400,
        "X-Fleetscope-Batch-Id must be 1-64 characters",
    ),
}


@pytest.mark.parametrize("case", sorted(ENVELOPE_CASES))
def test_bad_envelope_is_refused_before_the_body_is_read(server: Server, case: str) -> None:
    assert post_batch(server.url, "gpu_samples", gpu_batch("before"), token=TOKEN).status == 202
    changes, status, message = ENVELOPE_CASES[case]
    headers = headers_for("env-1", TOKEN) | changes
    answer = raw_post(server.url, "/v1/batches/gpu_samples", to_ipc(gpu_batch("x")), headers)
    assert answer.status == status
    assert str(answer.body["error"]).startswith(message)
    assert answer.headers.get("connection") == "close"  # the unread body never reaches a parser
    assert stored(server) == (80, 80)


def test_oversized_batch_is_413_before_reading(settings: Settings) -> None:
    small = Server(settings.with_overrides(server__max_body_bytes=10_000))
    small.start()
    try:
        body = to_ipc(gpu_batch("big", timestamps=100))
        assert len(body) > 10_000
        answer = raw_post(small.url, "/v1/batches/gpu_samples", body, headers_for("big-1", TOKEN))
        assert answer.status == 413
        assert answer.body["error"] == (
            f"body of {len(body)} bytes is over the limit of 10000 bytes "
            "(server.max_body_bytes); send smaller batches"
        )
        tiny = gpu_batch("ok", timestamps=1, gpus=1)
        assert post_batch(small.url, "gpu_samples", tiny, token=TOKEN).status == 202
        assert stored(small) == (1, 1)
    finally:
        small.stop()


def test_a_retried_batch_is_stored_once_even_after_a_restart(settings: Settings) -> None:
    batch = gpu_batch("node-a", timestamps=2)
    first = Server(settings)
    first.start()
    try:
        assert post_batch(first.url, "gpu_samples", batch, token=TOKEN, batch_id="same").body == {
            "batch_id": "same",
            "rows": 16,
            "duplicate": False,
        }
        again = post_batch(first.url, "gpu_samples", batch, token=TOKEN, batch_id="same")
        assert (again.status, again.body["duplicate"]) == (202, True)
    finally:
        first.stop()
    second = Server(settings)
    second.start()
    try:
        retry = post_batch(second.url, "gpu_samples", batch, token=TOKEN, batch_id="same")
        assert (retry.status, retry.body) == (
            202,
            {"batch_id": "same", "rows": 16, "duplicate": True},
        )
        assert stored(second) == (16, 16)
    finally:
        second.stop()


def test_keep_alive_connection_serves_many_batches(server: Server) -> None:
    host, port = server.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        for i in range(5):
            body = to_ipc(gpu_batch("ka", start_ms=EPOCH_MS + i * 10_000, timestamps=10))
            answer = post(conn, "/v1/batches/gpu_samples", body, headers_for(f"ka-{i}", TOKEN))
            assert answer.status == 202
    finally:
        conn.close()
    assert stored(server) == (400, 400)


def test_hosts_and_gpu_allocations_follow_the_samples(server: Server) -> None:
    batch = gpu_batch("node-b", timestamps=3, gpus=2, job_id="train-7")
    assert post_batch(server.url, "gpu_samples", batch, token=TOKEN, agent="node-b").status == 202
    server.writer.flush_log_now()  # the catalog upserts run with the flush, off the ack path
    with server.catalog.connect() as conn:
        hosts = fleet.list_hosts(conn)
        allocations = fleet.allocations(conn, job_id="train-7")
    assert [(h.host, h.cluster, h.agent_version) for h in hosts] == [("node-b", "sim", "0.1.0")]
    assert [(a.host, a.gpu_index, a.gpu_uuid) for a in allocations] == [
        ("node-b", 0, "GPU-node-b-0"),
        ("node-b", 1, "GPU-node-b-1"),
    ]
    assert [int(a.last_ts.timestamp() * 1000) - EPOCH_MS for a in allocations] == [2000, 2000]


def _post_json(url: str, body: bytes, token: str = TOKEN) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(
        url + "/v1/jobs",
        data=body,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


def test_jobs_are_upserted_and_partial_records_keep_known_fields(server: Server) -> None:
    start = {"job_id": "j1", "user": "ada", "team": "vision", "start_ts": "2026-03-02T10:00:00Z"}
    assert _post_json(server.url, json.dumps([start]).encode()) == (200, {"jobs": 1})
    end = {"job_id": "j1", "end_ts": 1772452800, "gpus": 8}
    assert _post_json(server.url, json.dumps([end]).encode()) == (200, {"jobs": 1})
    with server.catalog.connect() as conn:
        job = fleet.get_job(conn, "j1")
    assert job is not None
    assert (job.user, job.team, job.gpus) == ("ada", "vision", 8)
    assert job.start_ts is not None and job.start_ts.isoformat() == "2026-03-02T10:00:00+00:00"
    assert job.end_ts is not None and job.end_ts.isoformat() == "2026-03-02T12:00:00+00:00"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{", "body is not JSON"),
        (b'{"job_id": "x"}', "body must be a JSON list of job records"),
        (b'[{"user": "ada"}]', "jobs[0].job_id: required, a non-empty string"),
        (
            b'[{"job_id": "a"}, {"job_id": "b", "gpus": -1}]',
            "jobs[1].gpus: expected a non-negative",
        ),
        (
            b'[{"job_id": "a", "start_ts": "2026-03-02 10:00"}]',
            "jobs[0].start_ts: expected ISO 8601",
        ),
        (b'[{"job_id": "a", "colour": "red"}]', "jobs[0]: unknown fields ['colour']"),
    ],
)
def test_bad_job_records_are_400_and_store_nothing(
    server: Server, body: bytes, message: str
) -> None:
    status, answer = _post_json(server.url, body)
    assert status == 400
    assert str(answer["error"]).startswith(message)
    with server.catalog.connect() as conn:
        assert fleet.list_jobs(conn) == []


def test_jobs_need_a_token(server: Server) -> None:
    assert _post_json(server.url, b"[]", token="wrong") == (
        401,
        {"error": "invalid or revoked bearer token"},
    )


def test_healthz_and_metrics(server: Server) -> None:
    assert post_batch(server.url, "gpu_samples", gpu_batch("m"), token=TOKEN).status == 202
    server.writer.flush_log_now()
    with urllib.request.urlopen(server.url + "/healthz") as response:
        assert json.loads(response.read()) == {"status": "ok", "queued_rows": 0}
    scrape = urllib.request.Request(
        server.url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}
    )  # read_auth is on by default: /metrics carries job data
    with urllib.request.urlopen(scrape) as response:
        text = response.read().decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("fleetscope_writer_rows_total", (("table", "gpu_samples"),))] == 80
    assert samples[("fleetscope_writer_values_total", (("table", "gpu_samples"),))] == 80 * 26
    key = ("fleetscope_ingest_requests_total", (("route", "batches"), ("status", "202")))
    assert samples[key] == 1


def _metric_samples(server: Server) -> dict[str, float]:
    scrape = urllib.request.Request(
        server.url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    with urllib.request.urlopen(scrape) as response:
        text = response.read().decode()
    return {
        s.name: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("fleetscope_ingest_log_")
    }


def test_ingest_log_figures_on_metrics(settings: Settings) -> None:
    server = Server(settings.with_overrides(warehouse__log_flush_interval_s=3600.0))
    server.start()
    try:
        assert post_batch(server.url, "gpu_samples", gpu_batch("m"), token=TOKEN).status == 202
        logged = _metric_samples(server)  # acknowledged, in the log, not flushed yet
        server.writer.flush_log_now()
        flushed = _metric_samples(server)
    finally:
        server.stop()
    assert logged["fleetscope_ingest_log_groups_logged_total"] == 1
    assert logged["fleetscope_ingest_log_fsyncs_total"] >= 2  # the group's, the new segment's
    assert logged["fleetscope_ingest_log_batches_quarantined_total"] == 0
    assert logged["fleetscope_ingest_log_pending_bytes"] > 80 * 26 * 4  # 80 rows' values at least
    assert logged["fleetscope_ingest_log_flush_lag_seconds"] > 0
    assert flushed["fleetscope_ingest_log_pending_bytes"] == 0
    assert flushed["fleetscope_ingest_log_flush_lag_seconds"] == 0
    assert (
        flushed["fleetscope_ingest_log_fsyncs_total"] > logged["fleetscope_ingest_log_fsyncs_total"]
    )


def test_unknown_route_and_method(server: Server) -> None:
    assert raw_post(server.url, "/v2/anything", b"", {"Content-Length": "0"}).status == 404
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(server.url + "/v1/jobs")
    with info.value:
        assert info.value.code == 405
