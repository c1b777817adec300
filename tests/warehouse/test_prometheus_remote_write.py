"""Prometheus remote_write: the wire format, scrape assembly across requests, and the endpoint.

Pages are the real dcgm-exporter variants in tests/data/dcgm, sent the way Prometheus sends
them: one TimeSeries per sample, empty labels dropped (Prometheus has no empty label values),
`job`/`instance` target labels added, series cut into requests at arbitrary points.
"""

from __future__ import annotations

import http.client
import itertools
import struct
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import snappy
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetscope.attribution.labels import HpcJobLabel, PodLabels
from fleetscope.attribution.resolver import AttributionResolver
from fleetscope.contract import GPU_SAMPLES
from fleetscope.errors import ContractError
from fleetscope.exposition import parse
from fleetscope.normalize import normalize_samples
from fleetscope.settings import Settings
from simulator.wire import TEST_TOKEN
from warehouse.ingest.runtime import Server
from warehouse.prometheus.prompb import (
    STALE_NAN_BITS,
    DecodeLimits,
    Series,
    decode_write_request,
    encode_write_request,
    is_stale_marker,
)
from warehouse.prometheus.remote_write import Assembler, Scrape, unit_of

DATA = Path(__file__).parent.parent / "data" / "dcgm"
PAGES = sorted(p.name for p in DATA.glob("*.prom"))
STALE = struct.unpack("<d", struct.pack("<Q", STALE_NAN_BITS))[0]
T0 = (int(time.time()) - 60) * 1000  # recent: the restart watermark reads the last 3 hours
INSTANCE = "10.0.0.7:9400"


def page_series(page: str, ts_ms: int, *, extra: dict[str, str] | None = None) -> list[Series]:
    """A page as Prometheus remote-writes it (one sample per series, in page order)."""
    out = []
    for sample in parse(page).samples:
        labels = {k: v for k, v in sample.labels.items() if v}
        labels |= {"__name__": sample.name, "job": "dcgm", "instance": INSTANCE, **(extra or {})}
        out.append(Series(labels, [(ts_ms, float(sample.value))]))
    return out


def agent_rows(page: str, ts_ms: int, cluster: str = "default") -> list[dict[str, Any]]:
    readings = normalize_samples(parse(page).samples, ts_ms=ts_ms, cluster=cluster)
    AttributionResolver([HpcJobLabel(), PodLabels()]).resolve(readings)
    return [table_row(r.row) for r in readings]


def table_row(row: dict[str, object]) -> dict[str, Any]:
    return {name: row.get(name) for name in GPU_SAMPLES.names}


def rows_of(scrapes: list[Scrape]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = unit_of(scrapes).table.to_pylist()
    for row in rows:
        row["ts"] = int(row["ts"].timestamp() * 1000)
        row["extra"] = dict(row["extra"]) if row["extra"] is not None else None
    return rows


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- wire format -------------------------------------------------------------------------------
label_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.dictionaries(label_text, label_text, max_size=4),
            st.lists(
                st.tuples(st.integers(-(2**62), 2**62), st.floats(allow_nan=False)), max_size=3
            ),
        ),
        max_size=5,
    )
)
def test_encode_then_decode_gives_back_every_label_and_sample(
    raw: list[tuple[dict[str, str], list[tuple[int, float]]]],
) -> None:
    series = [Series(labels, samples) for labels, samples in raw]
    body = encode_write_request(series)
    assert decode_write_request(body, limits=DecodeLimits(1 << 20)) == series


def test_only_prometheus_stale_nan_is_a_staleness_marker() -> None:
    body = encode_write_request([Series({"__name__": "x"}, [(1, STALE), (2, float("nan"))])])
    (series,) = decode_write_request(body, limits=DecodeLimits(1 << 20))
    assert [is_stale_marker(v) for _, v in series.samples] == [True, False]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "empty body"),
        (b"\xff\xff\xff\xff\xff\xff", "bad length header"),
        (b"\x10garbage", "not snappy-compressed"),
        (snappy.compress(b"\x0a\xff\xff"), "not a remote_write WriteRequest protobuf"),
        (snappy.compress(b"x" * 5000), "decompresses to 5000 bytes, over the limit of 4096"),
    ],
)
def test_bad_bodies_are_named(body: bytes, message: str) -> None:
    with pytest.raises(ContractError, match=message):
        decode_write_request(body, limits=DecodeLimits(4096))


# -- assembly ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", PAGES)
def test_a_scrape_split_over_requests_becomes_the_agents_rows(name: str) -> None:
    page = (DATA / name).read_text()
    first, second = page_series(page, T0), page_series(page, T0 + 1000)
    assembler = Assembler(default_cluster="default", hold_s=60.0, clock=Clock())
    cut = len(first) // 3
    assembler.add(first[:cut])
    assert assembler.take() == []
    assembler.add(first[cut:] + second[:5])
    assert assembler.take() == []  # the series after the first five have not moved past T0
    assembler.add(second[5:])
    (scrape,) = assembler.take()
    assert rows_of([scrape]) == agent_rows(page, T0)
    assert (scrape.complete, assembler.stats.scrapes_incomplete, assembler.waiting) == (True, 0, 1)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 3 * 180), max_size=8))
def test_any_cut_of_three_scrapes_into_requests_gives_the_same_rows(cuts: list[int]) -> None:
    """Whatever Prometheus's batches look like (one shard: order kept), rows are the pages'."""
    page = (DATA / "h100_slurm_main.prom").read_text()
    stream = [s for k in range(3) for s in page_series(page, T0 + 1000 * k)]
    bounds = [0, *sorted(c % (len(stream) + 1) for c in cuts), len(stream)]
    assembler = Assembler(default_cluster="default", hold_s=60.0, clock=Clock())
    taken: list[Scrape] = []
    for a, b in itertools.pairwise(bounds):
        assembler.add(stream[a:b])
        taken += assembler.take()
    assert [s.ts_ms for s in taken] == [T0, T0 + 1000]  # the third waits for a fourth
    assert rows_of(taken) == agent_rows(page, T0) + agent_rows(page, T0 + 1000)


def test_staleness_markers_complete_the_scrape_of_a_target_that_went_away() -> None:
    page = (DATA / "a100_mig.prom").read_text()
    series = page_series(page, T0)
    assembler = Assembler(default_cluster="default", hold_s=60.0, clock=Clock())
    assembler.add(series)
    assert assembler.take() == []
    assembler.add([Series(s.labels, [(T0 + 1000, STALE)]) for s in series])
    (scrape,) = assembler.take()
    assert scrape.complete and rows_of([scrape]) == agent_rows(page, T0)
    assert assembler.stats.stale_markers == len(series)


def test_hold_timeout_stores_what_arrived_and_drops_what_comes_later() -> None:
    page = (DATA / "h100_k8s_release.prom").read_text()
    series = page_series(page, T0)
    clock = Clock()
    assembler = Assembler(default_cluster="default", hold_s=30.0, clock=clock)
    assembler.add(series[:100])
    clock.now += 29.9
    assert assembler.take(all_targets=True) == []
    clock.now += 0.1
    (scrape,) = assembler.take(all_targets=True)
    assert not scrape.complete and len(scrape.samples) == 100
    assembler.add(series[100:])  # a late shard: that scrape is already stored
    assert assembler.take(all_targets=True) == []
    stats = assembler.stats
    assert (stats.late_samples, stats.scrapes_incomplete) == (len(series) - 100, 1)
    assert assembler.waiting == 0


def test_other_series_are_counted_and_ignored_and_labels_are_mapped() -> None:
    page = (DATA / "h100_k8s_release.prom").read_text()
    series = page_series(page, T0, extra={"cluster": "east"})
    # A target label `pod` clashed with the exporter's: Prometheus renamed the exporter's.
    for s in series:
        if "pod" in s.labels:
            s.labels["exported_pod"] = s.labels["pod"]
            s.labels["pod"] = "dcgm-exporter-x7k2p"
    others = [
        Series({"__name__": "up", "instance": INSTANCE, "job": "dcgm"}, [(T0, 1.0)]),
        Series({"__name__": "node_load1", "instance": INSTANCE}, [(T0, 0.5)]),
        Series({"__name__": "DCGM_FI_DEV_COUNT", "instance": INSTANCE}, [(T0, 8.0)]),
    ]
    assembler = Assembler(default_cluster="default", hold_s=60.0, clock=Clock())
    assembler.add(others + series)
    (scrape,) = assembler.take(everything=True)
    assert rows_of([scrape]) == agent_rows(page, T0, cluster="east")
    assert assembler.stats.series_ignored == 3


def test_host_falls_back_to_the_instance_without_its_port() -> None:
    page = (DATA / "v100_legacy.prom").read_text()
    series = page_series(page, T0)
    for s in series:
        for name in ("Hostname", "hostname"):
            s.labels.pop(name, None)
    assembler = Assembler(default_cluster="default", hold_s=60.0, clock=Clock())
    assembler.add(series)
    rows = rows_of(assembler.take(everything=True))
    assert {r["host"] for r in rows} == {"10.0.0.7"}


# -- the endpoint ------------------------------------------------------------------------------
def post_write(
    url: str, body: bytes, *, token: str | None = TEST_TOKEN, **headers: str
) -> tuple[int, bytes]:
    sent = {
        "Content-Type": "application/x-protobuf",
        "Content-Encoding": "snappy",
        "X-Prometheus-Remote-Write-Version": "0.1.0",
        "User-Agent": "Prometheus/2.42.0",
    }
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    sent.update({k.replace("_", "-"): v for k, v in headers.items()})
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("POST", "/api/v1/write", body=body, headers=sent)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def stored(server: Server) -> list[tuple[int, str, int]]:
    server.writer.flush_log_now()  # acknowledged from the ingest log; stored by its flush
    rows = server.warehouse.cursor().execute(
        "SELECT epoch_ms(ts), host, gpu_index FROM gpu_samples ORDER BY ALL"
    )
    return [(int(t), str(h), int(g)) for t, h, g in rows.fetchall()]


@pytest.fixture
def rw_settings(settings: Settings) -> Settings:
    return settings.with_overrides(server__remote_write_hold_s=60.0, server__plugins="")


@pytest.fixture
def server(rw_settings: Settings) -> Iterator[Server]:
    running = Server(rw_settings)
    running.start()
    try:
        yield running
    finally:
        running.stop()


def test_complete_scrapes_are_stored_once_across_retries_and_restarts(
    rw_settings: Settings,
) -> None:
    page = (DATA / "h100_slurm_main.prom").read_text()
    scrapes = [page_series(page, T0 + 1000 * k) for k in range(3)]
    bodies = [encode_write_request(s) for s in scrapes]
    server = Server(rw_settings)
    server.start()
    try:
        assert post_write(server.url, bodies[0]) == (204, b"")
        assert stored(server) == []  # T0 waits for its series to move on
        assert post_write(server.url, bodies[1])[0] == 204
        assert stored(server) == [(T0, "dgx-b7", g) for g in range(8)]
        assert post_write(server.url, bodies[0])[0] == 204  # re-sent: late, dropped
        assert server.remote_write.assembler.stats.late_samples == len(scrapes[0])
    finally:
        server.stop()  # a clean stop stores the waiting T0 + 1000 as it is
    restarted = Server(rw_settings)
    restarted.start()
    try:
        for body in bodies[:2]:  # Prometheus re-sends what it had not seen answered
            assert post_write(restarted.url, body)[0] == 204
        assert post_write(restarted.url, bodies[2])[0] == 204
        assert stored(restarted) == [(T0 + 1000 * k, "dgx-b7", g) for k in (0, 1) for g in range(8)]
        scrape = urllib.request.Request(
            f"{restarted.url}/metrics", headers={"Authorization": f"Bearer {TEST_TOKEN}"}
        )
        with urllib.request.urlopen(scrape) as answer:
            metrics = answer.read().decode()
        late = 2 * len(scrapes[0])
        assert f'fleetscope_remote_write_samples_total{{outcome="late"}} {late}.0' in metrics
        assert "fleetscope_remote_write_waiting_scrapes 1.0" in metrics
        assert 'fleetscope_ingest_requests_total{route="remote_write",status="204"} 3.0' in metrics
    finally:
        restarted.stop()


@pytest.mark.parametrize(
    ("body", "headers", "status", "message"),
    [
        (b"not snappy", {}, 400, b"not snappy-compressed"),
        (snappy.compress(b"\x0a\x05abc"), {}, 400, b"not a remote_write WriteRequest"),
        (b"x", {"Content_Type": "application/json"}, 415, b"Content-Type must be"),
        (b"x", {"Content_Encoding": "gzip"}, 415, b"Content-Encoding must be snappy"),
        (
            b"x",
            {"Content_Type": "application/x-protobuf;proto=io.prometheus.write.v2.Request"},
            415,
            b"only remote_write 1.0",
        ),
        (b"x", {"X_Prometheus_Remote_Write_Version": "2.0.0"}, 415, b"version '2.0.0'"),
    ],
)
def test_refusals_say_what_is_wrong(
    server: Server, body: bytes, headers: dict[str, str], status: int, message: bytes
) -> None:
    got_status, answer = post_write(server.url, body, **headers)
    assert got_status == status and message in answer, answer


def test_a_request_without_the_token_is_refused(server: Server) -> None:
    body = encode_write_request(page_series((DATA / "a100_mig.prom").read_text(), T0))
    status, answer = post_write(server.url, body, token=None)
    assert status == 401 and b"missing bearer token" in answer
    assert post_write(server.url, body, token="wrong")[0] == 401
    assert stored(server) == []
