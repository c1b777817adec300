"""Poison-batch isolation: one batch the store cannot hold fails nothing but itself.

The poison is real: a timestamp that Arrow holds but DuckDB cannot (year ~146 million), so the
body passes every ingest check. Before issue 12 it failed its whole group with 503 and its agent
retried it forever; since the ingest log (issue 27) acknowledges before the store sees a batch,
the writer refuses it (422) before logging it, and its group's other batches are logged.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa

from collector.backoff import Backoff
from collector.http import UrllibTransport
from collector.metrics import AgentMetrics
from collector.shipper import Shipper
from collector.spool import Spool
from fleetscope.contract import to_ipc
from fleetscope.settings import Settings
from simulator.maker.batches import EPOCH_MS, gpu_batch
from simulator.wire import TEST_TOKEN
from warehouse.ingest.runtime import Server
from warehouse.storage.segments import SegmentStore
from warehouse.storage.writer import Writer


def poison(host: str) -> pa.Table:
    batch = gpu_batch(host, timestamps=1, gpus=2)
    return batch.set_column(0, "ts", pa.array([2**62, 2**62], pa.timestamp("ms", tz="UTC")))


def rows_of(writer: Writer, host_prefix: str) -> int:
    cursor = writer.cursor()
    query = "SELECT count(*) FROM gpu_samples WHERE starts_with(host, ?)"
    (count,) = cursor.execute(query, [host_prefix]).fetchall()[0]
    return int(count)


def test_only_the_guilty_batch_of_a_group_is_refused(
    tmp_path: Path,
) -> None:
    writer = Writer(
        tmp_path / "t.duckdb",
        SegmentStore(tmp_path / "segments"),
        flush_rows=10**6,
        flush_interval_s=0.05,
        queue_max_rows=10**6,
    )
    # Queued before the writer starts: one flush group, deterministically.
    innocent = [
        writer.submit("gpu_samples", gpu_batch(f"ok-{i}", timestamps=2), f"ok-{i}")[0]
        for i in range(5)
    ]
    guilty, _ = writer.submit("gpu_samples", poison("bad-0"), "bad-0")
    writer.start()
    try:
        assert all(t.wait(30) for t in [*innocent, guilty])
        assert [(t.status, t.error) for t in innocent] == [(202, None)] * 5
        assert guilty.status == 422
        assert guilty.error is not None and "cannot be stored" in guilty.error
        writer.flush_log_now()
        assert rows_of(writer, "ok-") == 5 * 2 * 8
        assert rows_of(writer, "bad-") == 0
        # refused before the log: no flush failed
        assert (writer.stats.failed_flushes, writer.stats.batches_refused) == (0, 1)
    finally:
        writer.stop()


def shipper_for(spool: Spool, url: str, name: str) -> Shipper:
    return Shipper(
        spool, ingest_url=url, token=TEST_TOKEN, agent_name=name, transport=UrllibTransport(),
        metrics=AgentMetrics(), timeout_s=30, backoff=Backoff(base_s=0.01, cap_s=0.05),
    )  # fmt: skip


def test_agents_beside_a_poisoning_agent_all_commit_and_the_poison_is_dead_lettered(
    tmp_path: Path, settings: Settings
) -> None:
    """Six real agents (spool + shipper) ship at once into a server that groups their batches."""
    server = Server(
        settings.with_overrides(warehouse__flush_interval_s=0.3, warehouse__flush_idle_s=0.1)
    )
    server.start()
    try:
        shippers = []
        for a in range(6):
            spool = Spool(tmp_path / f"spool-{a}", max_bytes=10**9)
            for b in range(3):
                batch = gpu_batch(f"ok-{a}-{b}", start_ms=EPOCH_MS + b * 60_000, timestamps=2)
                body = to_ipc(poison(f"bad-{a}") if (a, b) == (5, 1) else batch)
                spool.put("gpu_samples", body)
            shippers.append(shipper_for(spool, server.url, f"agent-{a}"))
        results: dict[int, bool] = {}
        threads = [
            threading.Thread(target=lambda a=a, s=s: results.update({a: s.drain()}))
            for a, s in enumerate(shippers)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert results == {a: True for a in range(6)}  # every spool emptied: nothing retried
        server.writer.flush_log_now()
        assert rows_of(server.writer, "ok-") == 17 * 2 * 8
        assert rows_of(server.writer, "bad-") == 0
        guilty = shippers[5]
        dead = sorted(p.name for p in guilty.spool.dead_dir.iterdir())
        assert len(dead) == 2 and dead[1].endswith(".reason")
        reason = (guilty.spool.dead_dir / dead[1]).read_text()
        assert reason.startswith("HTTP 422:") and "cannot be stored" in reason
        assert guilty.metrics.batches_dead._value.get() == 1
        assert [s.metrics.batches_dead._value.get() for s in shippers[:5]] == [0] * 5
        assert server.writer.stats.batches_refused == 1
    finally:
        server.stop()
