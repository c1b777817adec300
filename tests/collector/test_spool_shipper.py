"""The spool and the shipper against a real ingest peer: order, idempotent retries, dead letters,
the size cap, and what each HTTP answer does to a batch."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa

from collector.backoff import Backoff
from collector.batcher import Batcher, rows_to_ipc
from collector.http import UrllibTransport
from collector.metrics import AgentMetrics
from collector.shipper import Shipper
from collector.spool import Spool
from fleetscope.contract import from_ipc


def host_rows(*ts: int) -> list[dict[str, object]]:
    return [{"ts": t, "host": "h", "load1": float(t)} for t in ts]


def shipper_for(spool: Spool, url: str, token: str = "t0ken") -> Shipper:
    return Shipper(
        spool, ingest_url=url, token=token, agent_name="h", transport=UrllibTransport(),
        metrics=AgentMetrics(), timeout_s=5, backoff=Backoff(base_s=0.01, cap_s=0.02),
    )  # fmt: skip


def test_spool_survives_a_restart_in_order_with_the_same_batch_ids(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=10**9)
    first = spool.put("host_samples", rows_to_ipc("host_samples", host_rows(1)))
    second = spool.put("host_samples", rows_to_ipc("host_samples", host_rows(2)))
    (tmp_path / ".tmp-0000000000000003.host_samples.x.arrow").write_bytes(b"half a batch")
    reopened = Spool(tmp_path, max_bytes=10**9)
    assert [(b.seq, b.batch_id) for b in reopened.pending()] == [
        (first.seq, first.batch_id),
        (second.seq, second.batch_id),
    ]
    assert not list(tmp_path.glob(".tmp-*"))
    third = reopened.put("host_samples", rows_to_ipc("host_samples", host_rows(3)))
    assert third.seq == second.seq + 1


def test_spool_cap_drops_oldest_and_counts(tmp_path: Path) -> None:
    body = rows_to_ipc("host_samples", host_rows(1))
    spool = Spool(tmp_path, max_bytes=len(body) * 2)
    batches = [spool.put("host_samples", body) for _ in range(4)]
    assert spool.pending() == batches[2:]
    assert spool.dropped == 2


def test_batches_arrive_in_order_and_the_spool_empties(tmp_path: Path, ingest: Any) -> None:
    spool = Spool(tmp_path, max_bytes=10**9)
    batcher = Batcher(spool, max_rows=3, max_age_s=60)
    batcher.add("host_samples", host_rows(*range(1, 8)), now=0.0)
    batcher.flush()
    shipper = shipper_for(spool, ingest.url)
    assert shipper.drain() is True
    assert spool.depth == 0
    assert [b.rows.num_rows for b in ingest.state.batches] == [3, 3, 1]
    ts = ingest.rows("host_samples").column("ts").cast(pa.int64()).to_pylist()
    assert ts == list(range(1, 8))
    assert shipper.metrics.samples_shipped.labels("host_samples")._value.get() == 7


def test_a_retried_batch_is_stored_once(tmp_path: Path, ingest: Any) -> None:
    spool = Spool(tmp_path, max_bytes=10**9)
    batch = spool.put("host_samples", rows_to_ipc("host_samples", host_rows(1, 2)))
    shipper = shipper_for(spool, ingest.url)
    body = spool.read(batch)
    assert body is not None
    assert shipper.send(batch, body) == "ok"
    assert shipper.send(batch, body) == "ok"  # the answer was lost; the retry reuses the id
    assert ingest.state.posts == 2
    assert [b.batch_id for b in ingest.state.batches] == [batch.batch_id]


def test_bad_batch_goes_to_dead_letter_and_the_next_one_still_ships(
    tmp_path: Path, ingest: Any
) -> None:
    spool = Spool(tmp_path, max_bytes=10**9)
    bad = spool.put("host_samples", b"not arrow at all")
    good = spool.put("host_samples", rows_to_ipc("host_samples", host_rows(5)))
    shipper = shipper_for(spool, ingest.url)
    assert shipper.drain() is True
    assert [b.batch_id for b in ingest.state.batches] == [good.batch_id]
    assert (spool.dead_dir / bad.path.name).read_bytes() == b"not arrow at all"
    assert "HTTP 400" in (spool.dead_dir / (bad.path.name + ".reason")).read_text()
    assert shipper.metrics.batches_dead._value.get() == 1


def test_wrong_token_and_5xx_keep_the_batch_for_retry(tmp_path: Path, ingest: Any) -> None:
    spool = Spool(tmp_path, max_bytes=10**9)
    batch = spool.put("host_samples", rows_to_ipc("host_samples", host_rows(1)))
    assert shipper_for(spool, ingest.url, token="wrong").drain() is False
    ingest.state.status_override = 503
    assert shipper_for(spool, ingest.url).drain() is False
    assert spool.pending() == [batch]
    ingest.state.status_override = None
    assert shipper_for(spool, ingest.url).drain() is True
    assert [b.batch_id for b in ingest.state.batches] == [batch.batch_id]


def test_unreachable_ingest_keeps_everything(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=10**9)
    spool.put("host_samples", rows_to_ipc("host_samples", host_rows(1)))
    shipper = shipper_for(spool, "http://127.0.0.1:9")
    assert shipper.drain() is False
    assert spool.depth == 1
    assert shipper.metrics.errors.labels("ingest_unreachable")._value.get() == 1


def test_backoff_is_exponential_full_jitter_and_capped() -> None:
    backoff = Backoff(base_s=1.0, cap_s=8.0, rng=random.Random(3))
    delays = [backoff.next_delay() for _ in range(6)]
    ceilings = [1, 2, 4, 8, 8, 8]
    assert all(0 <= d <= c for d, c in zip(delays, ceilings, strict=True))
    backoff.reset()
    assert backoff.next_delay() <= 1.0


def test_rows_to_ipc_fills_missing_columns_with_nulls() -> None:
    table = from_ipc(rows_to_ipc("host_samples", host_rows(1)))
    assert table.column("cpu_user_pct").null_count == 1
    assert table.column("host").to_pylist() == ["h"]
