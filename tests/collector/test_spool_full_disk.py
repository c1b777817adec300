"""A really full spool disk on the agent (issue 28, owed agent-side case): a write that gets
ENOSPC drops the oldest spooled batch, as the size cap does (warned, counted in
fleetscope_agent_batches_dropped_total), and sealing goes on: the agent keeps collecting.

The disk is real: a 1 MiB tmpfs mounted by the test holds the spool, whose size cap is far
above it, so only the disk can refuse. Needs root to mount (CI runs as root).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.fuzz import free_port
from collector.backoff import Backoff
from collector.batcher import Batcher
from collector.http import UrllibTransport
from collector.metrics import AgentMetrics
from collector.shipper import Shipper
from collector.spool import Spool
from simulator.maker.batches import EPOCH_MS, gpu_batch
from tests.tmpfs import small_tmpfs

ROWS = 8 * 50  # gpu_batch: 8 GPUs x 50 timestamps, about 63 KB on the wire


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path / "disk", "1m") as disk:
        yield disk


def rows(n: int) -> list[dict[str, object]]:
    return gpu_batch("h", start_ms=EPOCH_MS + n * 50_000, timestamps=50).to_pylist()


def test_a_full_spool_disk_drops_the_oldest_counts_them_and_sealing_goes_on(
    small_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spool = Spool(small_disk / "spool", max_bytes=10**9)
    batcher = Batcher(spool, max_rows=ROWS, max_age_s=3600)
    with caplog.at_level(logging.WARNING, logger="collector.spool"):
        sealed = [batcher.add("gpu_samples", rows(n), float(n)) for n in range(40)]
    assert [len(one) for one in sealed] == [1] * 40  # every tick's batch is durable
    kept = spool.pending()
    assert 5 <= len(kept) < 40  # about 16 fit in 1 MiB
    assert [b.seq for b in kept] == list(range(41 - len(kept), 41))  # the newest, in order
    assert spool.dropped == 40 - len(kept)
    full = [r.getMessage() for r in caplog.records if "spool disk full" in r.getMessage()]
    assert len(full) == spool.dropped and all("dropped the oldest batch" in m for m in full)
    on_disk = sorted(p.name for p in spool.root.iterdir() if p.is_file())
    assert on_disk == [b.path.name for b in kept]  # no `.tmp-` file left behind
    shipper = Shipper(
        spool, ingest_url=f"http://127.0.0.1:{free_port()}", token="t" * 32, agent_name="h",
        transport=UrllibTransport(), metrics=AgentMetrics(), timeout_s=5,
        backoff=Backoff(base_s=0.01, cap_s=0.05),
    )  # fmt: skip
    assert not shipper.drain()  # ingest unreachable: retry later
    dropped = shipper.metrics.registry.get_sample_value("fleetscope_agent_batches_dropped_total")
    assert dropped == spool.dropped


def test_a_disk_filled_by_something_else_drops_the_new_batch_until_space_returns(
    small_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spool = Spool(small_disk / "spool", max_bytes=10**9)
    batcher = Batcher(spool, max_rows=ROWS, max_age_s=3600)
    ballast = small_disk / "ballast"
    with ballast.open("wb", buffering=0) as handle, pytest.raises(OSError):
        while True:  # fill the disk to its last byte
            handle.write(b"\0" * 65536)
    with caplog.at_level(logging.ERROR, logger="collector.spool"):
        assert batcher.add("gpu_samples", rows(0), 0.0) == []
    assert (spool.depth, spool.dropped) == (0, 1)
    assert any("no spooled batch left to drop" in r.getMessage() for r in caplog.records)
    assert not [p for p in spool.root.iterdir() if p.is_file()]  # no `.tmp-` file either
    ballast.unlink()
    [batch] = batcher.add("gpu_samples", rows(1), 1.0)
    assert spool.pending() == [batch] and spool.read(batch)
