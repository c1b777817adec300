"""Prometheus remote_write on fleet gateways: scrapes assembled in one gateway's memory, stored
in the fleet's Iceberg gpu_samples through the FleetWriter and the shared ledger.

Bodies are built as the embedded tests build them (tests.warehouse.test_prometheus_remote_write:
a real dcgm-exporter page, one TimeSeries per sample, snappy WriteRequest). The last two tests
break the deployment rule (every shard of one Prometheus reaches one gateway) on purpose, to pin
down what a split scrape becomes.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleetscope.errors import IngestError
from fleetscope.settings import Settings
from simulator.wire import TEST_TOKEN
from tests.warehouse.test_prometheus_remote_write import (
    DATA,
    T0,
    Clock,
    agent_rows,
    page_series,
    post_write,
    rows_of,
)
from warehouse.fleet import reader
from warehouse.fleet.gateway import Gateway
from warehouse.fleet.reader import newest_per_target
from warehouse.prometheus.prompb import DecodeLimits, Series, encode_write_request
from warehouse.prometheus.remote_write import Assembler, RemoteWrite
from warehouse.prometheus.rows import ScrapeKey

PAGE = (DATA / "h100_slurm_main.prom").read_text()


@pytest.fixture
def rw_settings(fleet_settings: Settings) -> Settings:
    return fleet_settings.with_overrides(server__remote_write_hold_s=60.0)


def started(settings: Settings) -> Gateway:
    gateway = Gateway(settings)
    gateway.start()
    return gateway


@pytest.fixture
def gateway(rw_settings: Settings) -> Iterator[Gateway]:
    running = started(rw_settings)
    try:
        yield running
    finally:
        running.stop()


def stored_rows(gateway: Gateway) -> list[dict[str, Any]]:
    """Every gpu_samples row around T0 as the fleet holds it (contract schema, ts in ms), once
    the gateway's log is flushed (readable about a second after the 204 otherwise)."""
    gateway.writer.flush_log_now()
    start = datetime.fromtimestamp(T0 / 1000, UTC) - timedelta(hours=1)
    data, _ = reader.scan(gateway.writer.tables, "gpu_samples", start, start + timedelta(hours=2))
    rows: list[dict[str, Any]] = data.to_pylist()
    for row in rows:
        row["ts"] = int(row["ts"].timestamp() * 1000)
        row["extra"] = dict(row["extra"]) if row["extra"] is not None else None
    return sorted(rows, key=repr)


def keys(rows: list[dict[str, Any]]) -> list[tuple[int, str, int]]:
    return sorted((r["ts"], r["host"], r["gpu_index"]) for r in rows)


def metrics_of(gateway: Gateway) -> str:
    request = urllib.request.Request(
        f"{gateway.url}/metrics", headers={"Authorization": f"Bearer {TEST_TOKEN}"}
    )
    with urllib.request.urlopen(request) as answer:
        return str(answer.read().decode())


def test_a_scrape_split_over_two_requests_is_stored_as_the_agents_complete_rows(
    gateway: Gateway,
) -> None:
    first, second = page_series(PAGE, T0), page_series(PAGE, T0 + 1000)
    cut = len(first) // 2
    assert post_write(gateway.url, encode_write_request(first[:cut])) == (204, b"")
    assert stored_rows(gateway) == []  # half a scrape: nothing stored
    assert post_write(gateway.url, encode_write_request(first[cut:] + second))[0] == 204
    assert stored_rows(gateway) == sorted(agent_rows(PAGE, T0), key=repr)


def test_re_sent_bodies_are_stored_once_across_a_gateway_restart(rw_settings: Settings) -> None:
    scrapes = [page_series(PAGE, T0 + 1000 * k) for k in range(3)]
    bodies = [encode_write_request(s) for s in scrapes]
    gateway = started(rw_settings)
    try:
        assert post_write(gateway.url, bodies[0])[0] == 204
        assert post_write(gateway.url, bodies[1])[0] == 204
        assert keys(stored_rows(gateway)) == [(T0, "dgx-b7", g) for g in range(8)]
        assert post_write(gateway.url, bodies[0])[0] == 204  # re-sent: late, dropped
        assert keys(stored_rows(gateway)) == [(T0, "dgx-b7", g) for g in range(8)]
        assert gateway.remote_write.assembler.stats.late_samples == len(scrapes[0])
    finally:
        gateway.stop()  # a clean stop stores the waiting T0 + 1000 as it is
    restarted = started(rw_settings)
    try:
        for body in bodies[:2]:  # Prometheus re-sends what it had not seen answered
            assert post_write(restarted.url, body)[0] == 204
        assert post_write(restarted.url, bodies[2])[0] == 204
        assert keys(stored_rows(restarted)) == [
            (T0 + 1000 * k, "dgx-b7", g) for k in (0, 1) for g in range(8)
        ]
        assert restarted.remote_write.assembler.stats.late_samples == 2 * len(scrapes[0])
        metrics = metrics_of(restarted)
        late = 2 * len(scrapes[0])
        assert f'fleetscope_remote_write_samples_total{{outcome="late"}} {late}.0' in metrics
        assert "fleetscope_remote_write_waiting_scrapes 1.0" in metrics
        assert 'fleetscope_ingest_requests_total{route="remote_write",status="204"} 3.0' in metrics
    finally:
        restarted.stop()


def test_a_malformed_body_is_refused_and_the_gateway_keeps_serving(gateway: Gateway) -> None:
    status, answer = post_write(gateway.url, b"not snappy")
    assert status == 400 and b"not snappy-compressed" in answer, answer
    for k in range(2):
        body = encode_write_request(page_series(PAGE, T0 + 1000 * k))
        assert post_write(gateway.url, body)[0] == 204
    assert keys(stored_rows(gateway)) == [(T0, "dgx-b7", g) for g in range(8)]


def test_a_failed_watermark_read_is_answered_503_and_read_again(gateway: Gateway) -> None:
    """Without its watermark a receiver could store a re-sent scrape twice: it never goes on
    without one (the store was unreachable: 503, Prometheus retries)."""
    reads: list[int] = []

    def watermarks() -> dict[ScrapeKey, int]:
        reads.append(len(reads))
        if len(reads) == 1:
            raise OSError("S3 endpoint unreachable")
        since = datetime.fromtimestamp(T0 / 1000, UTC) - timedelta(hours=1)
        return newest_per_target(gateway.writer.tables, since)

    receiver = RemoteWrite(
        gateway.writer,
        watermarks=watermarks,
        default_cluster="default",
        hold_s=60.0,
        commit_timeout_s=30.0,
        limits=DecodeLimits(1 << 24),
    )
    for k in range(2):  # T0 stored through the gateway's own receiver
        body = encode_write_request(page_series(PAGE, T0 + 1000 * k))
        assert post_write(gateway.url, body) == (204, b"")
    gateway.writer.flush_log_now()  # staged: what the watermark reads
    body = encode_write_request(page_series(PAGE, T0))
    with pytest.raises(IngestError, match="S3 endpoint unreachable") as refused:
        receiver.receive(body)
    assert refused.value.status == 503
    receiver.receive(body)  # read again: T0 is stored, its samples are late
    assert (len(reads), receiver.assembler.stats.late_samples) == (2, len(page_series(PAGE, T0)))
    assert keys(stored_rows(gateway)) == [(T0, "dgx-b7", g) for g in range(8)]


# -- the deployment rule broken: one Prometheus's shards on two gateways -----------------------
SPLITS = ["by_ref", "by_field"]


def shards(ts_ms: int, split: str) -> tuple[list[Series], list[Series]]:
    """One scrape's series dealt to two shards. `by_ref` is Prometheus's own rule (`ref % shards`,
    refs numbered in the page's order): this page lists each field for its 8 GPUs in turn, so
    shard 0 gets all of GPUs 0, 2, 4, 6 and shard 1 all of the odd ones. `by_field` cuts the
    page in the middle of its fields, every GPU in both shards (other pages, other shard counts)."""
    series = page_series(PAGE, ts_ms)
    if split == "by_ref":
        return series[0::2], series[1::2]
    return series[: len(series) // 2], series[len(series) // 2 :]


def part_rows(*parts: list[Series]) -> list[dict[str, Any]]:
    """The rows one gateway makes of the scrapes of which it got only `parts`."""
    assembler = Assembler(default_cluster="default", hold_s=60.0, clock=Clock())
    assembler.add([s for part in parts for s in part])
    return rows_of(assembler.take(everything=True))


@pytest.fixture
def two_gateways(rw_settings: Settings) -> Iterator[tuple[Gateway, Gateway]]:
    a, b = started(rw_settings), started(rw_settings)
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


@pytest.mark.parametrize("split", SPLITS)
def test_split_shards_store_each_scrape_once_and_lose_the_other_gateways_part(
    two_gateways: tuple[Gateway, Gateway], split: str
) -> None:
    """Each gateway assembles its part of a scrape and submits it under the scrape's batch id
    (it hashes the (cluster, host, ts) key alone), so the ledger keeps whichever part was staged
    first and answers the other as a duplicate once it is (here each request's log is flushed
    before the next; within one log flush both are logged and the later flush drops its part
    uncounted), counted on its gateway: never two rows for one
    key, whatever the request boundaries (b takes T0 and T1 in one request, a one at a time);
    by_ref loses the other GPUs' rows, by_field leaves every row without the other fields."""
    a, b = two_gateways

    def post(gw: Gateway, series: list[Series]) -> None:
        assert post_write(gw.url, encode_write_request(series))[0] == 204
        gw.writer.flush_log_now()  # in the shared ledger: the other gateway's copy is a duplicate

    (a0, b0), (a1, b1), (a2, b2) = (shards(T0 + 1000 * k, split) for k in range(3))
    post(a, a0)  # a reads its watermark
    post(b, b0)  # b reads its watermark
    post(a, a1)  # a stores its T0
    post(b, b1 + b2)  # b: its T0 dup, T1 stored
    post(a, a2)  # a: its T1 dup
    rows = stored_rows(a)
    assert rows == sorted(part_rows(a0) + part_rows(b1), key=repr)
    if split == "by_ref":
        assert keys(rows) == [(T0, "dgx-b7", g) for g in (0, 2, 4, 6)] + [
            (T0 + 1000, "dgx-b7", g) for g in (1, 3, 5, 7)
        ]
    else:
        assert keys(rows) == [(T0 + 1000 * k, "dgx-b7", g) for k in (0, 1) for g in range(8)]
        whole = agent_rows(PAGE, T0) + agent_rows(PAGE, T0 + 1000)
        assert not {repr(r) for r in rows} & {repr(r) for r in whole}  # every row partial
    assert (a.remote_write.already_stored, b.remote_write.already_stored) == (1, 1)
    assert "fleetscope_remote_write_already_stored_batches_total 1.0" in metrics_of(b)
