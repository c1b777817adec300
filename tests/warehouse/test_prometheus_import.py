"""`fleetscope import prometheus` pieces: times, durations, chunking, matrix -> rows, API errors,
ingest answers, and the command's refusals (messages and exit codes, never a traceback).

The end-to-end run against a real Prometheus is in test_prometheus_e2e.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.cli import main as fleetscope_main
from fleetscope.errors import ConfigError, IngestError, SourceUnavailableError
from fleetscope.exposition import parse
from fleetscope.settings import Settings
from simulator.wire import TEST_TOKEN
from warehouse.ingest.runtime import Server
from warehouse.prometheus.importer import (
    MAX_POINTS,
    ImportPlan,
    IngestClient,
    PrometheusAPI,
    chunks,
    parse_duration_ms,
    parse_time_ms,
    rows_of_matrix,
    run_import,
)
from warehouse.prometheus.rows import rows_to_table

DATA = Path(__file__).parent.parent / "data" / "dcgm"


@pytest.fixture
def server(settings: Settings) -> Iterator[Server]:
    running = Server(settings.with_overrides(server__plugins=""))  # ingest alone
    running.start()
    try:
        yield running
    finally:
        running.stop()


@pytest.mark.parametrize(
    ("text", "ms"),
    [("10s", 10_000), ("1m30s", 90_000), ("500ms", 500), ("2h", 7_200_000), ("2.5", 2500)],
)
def test_durations_are_prometheus_durations_or_seconds(text: str, ms: int) -> None:
    assert parse_duration_ms(text, what="--step") == ms


@pytest.mark.parametrize("text", ["", "10", "1x", "10s5", "-5", "0s", "nan"])
def test_bad_durations_are_named(text: str) -> None:
    if text == "10":
        assert parse_duration_ms(text, what="--step") == 10_000  # bare seconds are fine
        return
    with pytest.raises(ConfigError, match="--step"):
        parse_duration_ms(text, what="--step")


def test_times_are_rfc3339_with_offset_or_unix_seconds() -> None:
    assert parse_time_ms("2026-01-05T00:00:00Z", what="--start") == 1_767_571_200_000
    assert parse_time_ms("2026-01-05T01:00:00+01:00", what="--start") == 1_767_571_200_000
    assert parse_time_ms("1767571200.5", what="--start") == 1_767_571_200_500
    with pytest.raises(ConfigError, match="--start: expected RFC 3339 with an offset"):
        parse_time_ms("2026-01-05T00:00:00", what="--start")  # naive: ambiguous


@given(
    st.integers(0, 10**6),
    st.integers(0, 5000),
    st.integers(1, 100),
    st.integers(1, 50),
)
def test_chunks_cover_the_grid_once_and_respect_the_point_limit(
    start: int, length: int, step: int, points: int
) -> None:
    end = start + length
    grid = list(range(start, end + 1, step))
    covered: list[int] = []
    for first, last in chunks(start, end, step, points):
        part = list(range(first, last + 1, step))
        assert 1 <= len(part) <= points
        covered += part
    assert covered == grid


def test_plan_refuses_a_future_end_and_a_reversed_range() -> None:
    plan = ImportPlan("http://p:9090", 10_000, 20_000, 1000, 100)
    with pytest.raises(ConfigError, match="--end is in the future"):
        plan.check(now_ms=15_000)
    with pytest.raises(ConfigError, match="--end is before --start"):
        ImportPlan("http://p:9090", 20_000, 10_000, 1000, 100).check(now_ms=30_000)
    with pytest.raises(ConfigError, match=f"1 to {MAX_POINTS} points"):
        ImportPlan("http://p:9090", 0, 1, 1, MAX_POINTS + 1).check(now_ms=30_000)


def test_batch_ids_depend_on_what_is_imported_only() -> None:
    plan = ImportPlan("http://p:9090/", 0, 60_000, 1000, 10)
    same = ImportPlan("http://p:9090", 0, 120_000, 1000, 30)
    assert plan.batch_id(0, 9000, 0) == same.batch_id(0, 9000, 0)
    assert plan.batch_id(0, 9000, 0) != plan.batch_id(0, 9000, 1)
    assert plan.batch_id(0, 9000, 0) != ImportPlan("http://q:9090", 0, 1, 1000, 10).batch_id(
        0, 9000, 0
    )
    assert len(plan.batch_id(0, 9000, 123)) <= 64


def matrix_of(page: str, times_s: list[float]) -> list[dict[str, Any]]:
    """The query_range answer for a page that did not change over `times_s`."""
    out = []
    for sample in parse(page).samples:
        metric = {k: v for k, v in sample.labels.items() if v}
        metric |= {"__name__": sample.name, "instance": "n7:9400", "job": "dcgm"}
        out.append({"metric": metric, "values": [[t, str(sample.value)] for t in times_s]})
    return out


def test_matrix_rows_are_the_pages_rows_at_each_evaluation_time() -> None:
    page = (DATA / "a100_mig.prom").read_text()
    matrix = matrix_of(page, [1767571200.0, 1767571210.0])
    matrix.append({"metric": {"__name__": "up", "job": "dcgm"}, "values": [[1767571200.0, "1"]]})
    converted = rows_of_matrix(matrix, "west")
    assert converted.series_ignored == 1
    units = {(r["gpu_index"], r["mig_instance_id"]) for r in converted.rows}
    assert len(converted.rows) == 2 * len(units)
    assert [r["ts"] for r in converted.rows] == [1767571200000] * len(units) + [
        1767571210000
    ] * len(units)
    assert {r["cluster"] for r in converted.rows} == {"west"}
    assert {r["host"] for r in converted.rows} == {"gpu-node-07"}
    table = rows_to_table(converted.rows)
    assert table.num_rows == len(converted.rows)
    assert pa.compute.min(table.column("gpu_util")).as_py() is not None  # MIG: from GR_ENGINE


def test_prometheus_errors_are_reported_with_its_own_words() -> None:
    refusal = {
        "status": "error",
        "errorType": "bad_data",
        "error": "exceeded maximum resolution of 11,000 points per timeseries",
    }
    api = PrometheusAPI("http://p:9090", fetch=lambda url, timeout: json.dumps(refusal).encode())
    with pytest.raises(ConfigError, match="exceeded maximum resolution of 11,000 points"):
        api.query_range("up", 0, 1000, 1)
    html = PrometheusAPI("http://p:9090", fetch=lambda url, timeout: b"<html>login</html>")
    with pytest.raises(SourceUnavailableError, match="did not answer with Prometheus API JSON"):
        html.query_range("up", 0, 1000, 1)
    with pytest.raises(ConfigError, match="--url must be an http"):
        PrometheusAPI("p:9090")


def test_series_without_a_cluster_label_join_the_cluster_their_host_is_known_by() -> None:
    """issue 13: an agent reported host n7 in cluster `east`; the import of the same host's
    history (no `cluster` label on its series) lands there too, not in the import's default; a
    host nobody knows takes the default, and a `cluster` label always wins."""
    page = (DATA / "h100_slurm_main.prom").read_text()
    matrix = matrix_of(page, [1767571200.0])
    stranger = [
        {**s, "metric": {**s["metric"], "Hostname": "n9", "instance": "n9:9400"}} for s in matrix
    ]
    labelled = [{**s, "metric": {**s["metric"], "cluster": "lab"}} for s in matrix]
    hosts = {r["host"] for r in rows_of_matrix(matrix, "west").rows}
    known = {host: "east" for host in hosts}
    clusters = {r["cluster"] for r in rows_of_matrix(matrix, "west", known.get).rows}
    assert clusters == {"east"}
    assert {r["cluster"] for r in rows_of_matrix(stranger, "west", known.get).rows} == {"west"}
    assert {r["cluster"] for r in rows_of_matrix(labelled, "west", known.get).rows} == {"lab"}


def test_run_import_queries_each_chunk_and_selector(server: Server) -> None:
    page = (DATA / "h100_slurm_main.prom").read_text()
    calls: list[str] = []

    def fetch(url: str, timeout_s: float) -> bytes:
        calls.append(url)
        return json.dumps(
            {"status": "success", "data": {"resultType": "matrix", "result": matrix_of(page, [])}}
        ).encode()

    plan = ImportPlan(
        "http://p:9090", 0, 9000, 1000, 4, matches=("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED")
    )
    result = run_import(
        plan, PrometheusAPI(plan.prometheus_url, fetch=fetch), IngestClient(server.url, TEST_TOKEN)
    )
    assert (result.chunks, result.rows, result.batches) == (3, 0, 0)  # no values: no rows
    assert len(calls) == 6 and "start=4.000&end=7.000&step=1.000" in calls[2]


def test_ingest_refusals_and_silence_are_clear_errors(server: Server) -> None:
    table = rows_to_table([{"ts": 0, "host": "h", "gpu_index": 0}])
    with pytest.raises(IngestError, match="HTTP 401: invalid or revoked bearer token"):
        IngestClient(server.url, "wrong").post(table, "b-1")
    sleeps: list[float] = []
    silent = IngestClient("http://127.0.0.1:9", TEST_TOKEN, attempts=3, sleep=sleeps.append)
    with pytest.raises(SourceUnavailableError, match="after 3 attempts: no answer"):
        silent.post(table, "b-1")
    assert sleeps == [2.0, 4.0]
    assert IngestClient(server.url, TEST_TOKEN).post(table, "b-1") is False
    assert IngestClient(server.url, TEST_TOKEN).post(table, "b-1") is True  # already stored


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--step=fast"], "--step: not a duration: 'fast'"),
        (["--start=yesterday"], "--start: expected RFC 3339"),
        (["--end=4102444800"], "--end is in the future"),
        (["--url=ftp://p"], "--url must be an http(s) URL"),
        (["--ingest-url=nowhere"], "ingest URL must be http(s)://host[:port]"),
    ],
)
def test_the_command_explains_mistakes(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = {
        "--url": "http://127.0.0.1:9",
        "--start": "1767571200",
        "--end": "1767571260",
        "--ingest-url": "http://127.0.0.1:9",
    }
    for arg in args:
        key, value = arg.split("=", 1)
        base[key] = value
    argv = ["import", "prometheus", *(f"{k}={v}" for k, v in base.items()), "--token=t"]
    assert fleetscope_main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
