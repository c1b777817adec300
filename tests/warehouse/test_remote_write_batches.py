"""A remote_write request's complete scrapes go to the writer as ONE ticket of many parts
(issue 28: a catch-up request of 1,000 scrapes must be answered within 2 s), and each scrape stays
its own ledger batch: deduplicated, refused (409) and isolated (422) part by part.

Real writer on a real DuckDB file; real remote_write bodies of a real dcgm-exporter page.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from fleetscope.settings import Settings
from simulator.maker.batches import gpu_batch
from tests.warehouse.test_prometheus_remote_write import DATA, T0, page_series, post_write
from warehouse.ingest.batch_digest import content_digest
from warehouse.ingest.batch_queue import Part
from warehouse.ingest.runtime import Server
from warehouse.prometheus.prompb import encode_write_request
from warehouse.prometheus.remote_write import RemoteWrite
from warehouse.prometheus.remote_write_request import decode_limits
from warehouse.prometheus.remote_write_units import scrape_batch_id
from warehouse.storage.segments import SegmentStore
from warehouse.storage.writer import Writer

PAGE = (DATA / "h100_slurm_main.prom").read_text()
TARGET = ("default", "dgx-b7")


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[Writer]:
    running = Writer(
        tmp_path / "t.duckdb",
        SegmentStore(tmp_path / "segments"),
        flush_rows=10**6,
        flush_interval_s=0.05,
        queue_max_rows=10**6,
    )
    running.start()
    try:
        yield running
    finally:
        running.stop()


def hosts_stored(writer: Writer) -> dict[str, int]:
    writer.flush_log_now()  # acknowledged from the ingest log; stored by its flush
    rows = writer.cursor().execute("SELECT host, count(*) FROM gpu_samples GROUP BY 1")
    return {str(host): int(count) for host, count in rows.fetchall()}


def scrapes_stored(writer: Writer) -> list[int]:
    writer.flush_log_now()
    rows = writer.cursor().execute("SELECT DISTINCT epoch_ms(ts) FROM gpu_samples ORDER BY 1")
    return [int(ts) for (ts,) in rows.fetchall()]


def test_each_part_of_a_ticket_is_deduplicated_refused_or_stored_on_its_own(
    writer: Writer,
) -> None:
    stored = gpu_batch("dup", timestamps=1, gpus=2)
    other = gpu_batch("taken", timestamps=1, gpus=2)
    for batch_id, batch in (("p-dup", stored), ("p-conflict", other)):
        first, _ = writer.submit("gpu_samples", batch, batch_id)
        assert first.wait(30) and first.status == 202
    poison = gpu_batch("poison", timestamps=1, gpus=2)
    poison = poison.set_column(0, "ts", pa.array([2**62] * 2, pa.timestamp("ms", tz="UTC")))
    fresh = gpu_batch("fresh", timestamps=1, gpus=2)
    conflicting = gpu_batch("conflict", timestamps=1, gpus=2)
    parts = (
        Part("p-dup", 0, 2, content_digest("gpu_samples", stored)),
        Part("p-conflict", 2, 2, content_digest("gpu_samples", conflicting)),
        Part("p-poison", 4, 2, "poison"),
        Part("p-fresh", 6, 2, "fresh"),
    )
    data = pa.concat_tables([stored, conflicting, poison.cast(stored.schema), fresh])
    ticket, joined = writer.submit_parts("gpu_samples", data, parts, "prometheus-remote-write")
    assert not joined and ticket.wait(30)
    answers = [(c.batch_id, c.status, c.duplicate) for c in ticket.children]
    assert answers == [
        ("p-dup", 202, True),
        ("p-conflict", 409, False),
        ("p-poison", 422, False),
        ("p-fresh", 202, False),
    ]
    assert (ticket.status, ticket.error) == (202, None)  # nothing to retry
    assert hosts_stored(writer) == {"dup": 2, "taken": 2, "fresh": 2}
    ledger = writer.cursor().execute("SELECT batch_id, rows FROM ingest_batches ORDER BY 1")
    assert ledger.fetchall() == [("p-conflict", 2), ("p-dup", 2), ("p-fresh", 2)]


def test_one_request_completing_fifty_scrapes_stores_each_once_under_its_own_id(
    settings: Settings,
) -> None:
    series = [one for k in range(51) for one in page_series(PAGE, T0 + 1000 * k)]
    body = encode_write_request(series)
    server = Server(settings.with_overrides(server__remote_write_hold_s=60.0))
    server.start()
    try:
        assert post_write(server.url, body) == (204, b"")
        assert post_write(server.url, body) == (204, b"")  # a re-send: late, dropped
        server.writer.flush_log_now()
        cursor = server.warehouse.cursor()
        ledger = cursor.execute("SELECT batch_id, rows FROM ingest_batches ORDER BY 1")
        want = sorted((scrape_batch_id(TARGET, T0 + 1000 * k), 8) for k in range(50))
        assert ledger.fetchall() == want
        (rows,) = cursor.execute("SELECT count(*) FROM gpu_samples").fetchall()[0]
        assert rows == 50 * 8
        assert server.remote_write.rows_stored == 50 * 8
        assert server.remote_write.already_stored == 0
    finally:
        server.stop()


def test_two_receivers_taking_overlapping_scrapes_store_each_once(
    writer: Writer, settings: Settings
) -> None:
    """Like two gateways sharing a ledger that each got some of the same re-sent scrapes: their
    tickets group the scrapes differently, the ledger still stores each scrape once."""

    def receiver() -> RemoteWrite:
        return RemoteWrite(
            writer,
            watermarks=dict,
            default_cluster="default",
            hold_s=60.0,
            commit_timeout_s=30.0,
            limits=decode_limits(settings),
        )

    first, second = receiver(), receiver()
    body = encode_write_request  # scrapes k = lo..hi-1; the last one waits for its successor
    first.receive(body([s for k in range(11) for s in page_series(PAGE, T0 + 1000 * k)]))
    second.receive(body([s for k in range(5, 16) for s in page_series(PAGE, T0 + 1000 * k)]))
    assert scrapes_stored(writer) == [T0 + 1000 * k for k in range(15)]
    assert hosts_stored(writer) == {"dgx-b7": 15 * 8}
    assert (first.already_stored, second.already_stored) == (0, 5)
    assert (first.rows_stored, second.rows_stored) == (10 * 8, 5 * 8)
