"""A batch id is bound to its content (issue 28): an identical retry is an idempotent duplicate;
the same id with other content, or for another table, is refused 409 and stores nothing.

Against a real server on loopback (the ledger path: the first copy committed), and on the shared
request queue with no writer thread running (the in-flight path: the first copy still queued).
"""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow as pa
import pytest
from sqlalchemy import inspect, text

from collector.backoff import Backoff
from collector.http import UrllibTransport
from collector.metrics import AgentMetrics
from collector.shipper import Shipper
from collector.spool import Spool
from fleetscope.contract import to_ipc
from fleetscope.settings import Settings
from simulator.maker.batches import EPOCH_MS, gpu_batch, host_batch
from simulator.wire import TEST_TOKEN as TOKEN
from simulator.wire import post_batch
from tests.readable import eventually
from warehouse import catalog
from warehouse.ingest.batch_digest import content_digest
from warehouse.ingest.batch_queue import BatchQueue
from warehouse.ingest.runtime import Server
from warehouse.read import reader


def test_an_identical_retry_is_a_duplicate_and_other_content_is_a_conflict(
    server: Server,
) -> None:
    first = gpu_batch("node-a", timestamps=3, gpus=2)
    other = gpu_batch("node-a", start_ms=EPOCH_MS + 60_000, timestamps=3, gpus=2)
    answers = [
        post_batch(server.url, "gpu_samples", batch, token=TOKEN, batch_id="b-1", agent="node-a")
        for batch in (first, first, other)
    ]
    assert [(a.status, a.body.get("duplicate")) for a in answers] == [
        (202, False),
        (202, True),
        (409, None),
    ]
    assert "b-1 was already stored with other content" in str(answers[2].body["error"])
    other_table = post_batch(
        server.url, "host_samples", host_batch("node-a", timestamps=3), token=TOKEN, batch_id="b-1"
    )
    assert other_table.status == 409
    assert "already used for table gpu_samples, not host_samples" in str(other_table.body["error"])
    server.writer.flush_log_now()  # acknowledged from the ingest log; stored by its flush
    stored = reader.connect(server.settings).execute(
        "SELECT count(*), min(epoch_ms(ts)) FROM gpu_samples"
    )
    assert stored.fetchall() == [(6, EPOCH_MS)]  # the first copy only
    hosts = reader.connect(server.settings).execute("SELECT count(*) FROM host_samples")
    assert hosts.fetchall() == [(0,)]
    assert server.writer.stats.batches_refused == 2


def test_a_conflict_survives_a_restart(settings: Settings) -> None:
    first = gpu_batch("node-b", timestamps=2, gpus=1)
    before = Server(settings)
    before.start()
    try:
        answer = post_batch(before.url, "gpu_samples", first, token=TOKEN, batch_id="b-2")
        assert answer.status == 202
    finally:
        before.stop()
    after = Server(settings)
    after.start()
    try:
        other = gpu_batch("node-b", timestamps=2, gpus=2)
        same = post_batch(after.url, "gpu_samples", first, token=TOKEN, batch_id="b-2")
        changed = post_batch(after.url, "gpu_samples", other, token=TOKEN, batch_id="b-2")
        assert (same.status, same.body["duplicate"]) == (202, True)
        assert changed.status == 409
    finally:
        after.stop()


def queue() -> BatchQueue:
    return BatchQueue(
        owner="server",
        queue_name="ingest",
        flush_rows=10**6,
        flush_interval_s=60.0,
        flush_idle_s=60.0,
        queue_max_rows=10**6,
    )


def test_a_retry_joining_a_queued_copy_must_carry_the_same_content() -> None:
    waiting = queue()
    batch = gpu_batch("node-c", timestamps=2, gpus=1)
    first, in_flight = waiting.submit("gpu_samples", batch, "b-3", "node-c")
    assert not in_flight and not first.wait(0)
    joined, in_flight = waiting.submit("gpu_samples", batch, "b-3", "node-c")
    assert joined is first and in_flight
    changed = gpu_batch("node-c", timestamps=2, gpus=2)
    refused, in_flight = waiting.submit("gpu_samples", changed, "b-3", "node-c")
    assert not in_flight and refused.wait(0) and refused.status == 409
    elsewhere, _ = waiting.submit("host_samples", host_batch("node-c"), "b-3", "node-c")
    assert elsewhere.status == 409 and "already used for table gpu_samples" in str(elsewhere.error)
    assert waiting.queued_rows == 2  # only the first copy waits for the writer


def test_the_digest_is_the_same_for_the_same_bytes_and_differs_for_one_changed_value() -> None:
    batch = gpu_batch("node-d", timestamps=4, gpus=2)
    body = to_ipc(batch)
    again = pa.ipc.open_stream(body).read_all()
    assert content_digest("gpu_samples", pa.ipc.open_stream(body).read_all()) == content_digest(
        "gpu_samples", again
    )
    util = batch.column("gpu_util").to_pylist()
    util[5] = (util[5] or 0) + 1
    changed = batch.set_column(
        batch.schema.get_field_index("gpu_util"),
        "gpu_util",
        pa.array(util, batch.schema.field("gpu_util").type),
    )
    assert content_digest("gpu_samples", changed) != content_digest("gpu_samples", batch)
    assert content_digest("host_samples", batch) != content_digest("gpu_samples", batch)


def test_a_real_agent_dead_letters_a_reused_id_with_a_log_line_and_ships_the_rest(
    tmp_path: Path, server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    """The agent's spool holds a batch under an id the server stored with other content (a cloned
    spool folder, a restored backup): it is moved to dead/ with its reason, the others ship."""
    stored = gpu_batch("node-e", timestamps=2, gpus=1)
    assert (
        post_batch(server.url, "gpu_samples", stored, token=TOKEN, batch_id="cloned").status == 202
    )
    spool = Spool(tmp_path / "spool", max_bytes=10**9)
    first = spool.put("gpu_samples", to_ipc(gpu_batch("node-e", start_ms=EPOCH_MS + 60_000)))
    cloned = first.path.with_name(first.path.name.replace(first.batch_id, "cloned"))
    first.path.rename(cloned)
    spool.put("gpu_samples", to_ipc(gpu_batch("node-e", start_ms=EPOCH_MS + 120_000)))
    shipper = Shipper(
        Spool(tmp_path / "spool", max_bytes=10**9), ingest_url=server.url, token=TOKEN,
        agent_name="node-e", transport=UrllibTransport(), metrics=AgentMetrics(), timeout_s=30,
        backoff=Backoff(base_s=0.01, cap_s=0.05),
    )  # fmt: skip
    with caplog.at_level(logging.WARNING):
        assert shipper.drain()
    dead = sorted(p.name for p in shipper.spool.dead_dir.iterdir())
    assert dead == [cloned.name, cloned.name + ".reason"]
    reason = (shipper.spool.dead_dir / dead[1]).read_text()
    assert reason.startswith("HTTP 409:") and "already stored with other content" in reason
    assert any("cloned" in r.getMessage() for r in caplog.records)
    query = "SELECT count(*) FROM gpu_samples WHERE ts > to_timestamp(?)"
    rows = eventually(
        lambda: reader.connect(server.settings).execute(query, [EPOCH_MS / 1000 + 30]).fetchall(),
        [(80,)],
    )
    assert rows == [(80,)]  # the batch after it: 10 timestamps x 8 GPUs


def test_a_catalog_from_before_digests_gets_the_ledger_column_on_connect(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    engine = catalog.connect(url)
    with engine.begin() as conn:
        conn.execute(
            text("ALTER TABLE ingest_ledger DROP COLUMN digest")
        )  # as an older build made it
    engine.dispose()
    engine = catalog.connect(url)
    columns = {c["name"] for c in inspect(engine).get_columns("ingest_ledger")}
    engine.dispose()
    assert "digest" in columns
