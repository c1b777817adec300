"""A full data disk: the server answers 503 (retry with the same batch id), keeps running, and once
space is back stores every refused batch; nothing acknowledged is lost or stored twice.

The disk is real: a 16 MiB tmpfs mounted for the test under tmp_path holds the server's whole data
folder (telemetry DuckDB, segments, catalog), and a ballast file fills it to a few KB of free space,
so the writer fails wherever the space runs out (a Parquet segment, DuckDB's WAL, the manifest).
Needs root to mount (CI runs as root).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from fleetscope.settings import Settings
from simulator.maker.batches import EPOCH_MS, gpu_batch
from simulator.wire import TEST_TOKEN as TOKEN
from simulator.wire import Answer, post_batch
from tests.readable import eventually
from tests.tmpfs import small_tmpfs
from warehouse.ingest.runtime import Server
from warehouse.read import reader

ROWS_PER_BATCH = 80  # 10 timestamps x 8 GPUs


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path / "disk", "16m") as disk:
        yield disk


def batch(i: int) -> pa.Table:
    return gpu_batch(f"node-{i % 5}", start_ms=EPOCH_MS + i * 10_000, timestamps=10, gpus=8)


def send(server: Server, i: int) -> Answer:
    return post_batch(server.url, "gpu_samples", batch(i), token=TOKEN, batch_id=f"b-{i}")


@pytest.mark.parametrize("free_kib", [0, 160])
def test_a_full_disk_is_503_and_every_batch_is_stored_once_when_space_returns(
    settings: Settings, small_disk: Path, free_kib: int
) -> None:
    on_disk = settings.with_overrides(core__data_dir=str(small_disk / "data"))
    server = Server(on_disk)
    server.start()
    try:
        stat = os.statvfs(small_disk)
        ballast = small_disk / "ballast"
        ballast.write_bytes(b"\0" * (stat.f_bavail * stat.f_frsize - free_kib * 1024))
        acked: set[int] = set()
        refused: list[int] = []
        for i in range(400):
            answer = send(server, i)
            if answer.status == 202:
                acked.add(i)
                continue
            assert answer.status == 503, answer.body
            assert "retry with the same batch id" in str(answer.body["error"])
            refused.append(i)
            if len(refused) == 4:
                break
        assert len(refused) == 4, "the disk never filled"
        assert send(server, 0).status in (202, 503)  # still answering, never a dropped connection
        ballast.unlink()
        for i in refused:
            deadline = time.monotonic() + 60
            while (answer := send(server, i)).status != 202:
                assert answer.status == 503 and time.monotonic() < deadline, answer.body
                time.sleep(0.2)
            assert answer.body["duplicate"] is False
            acked.add(i)
        expected = [(len(acked) * ROWS_PER_BATCH, len(acked) * ROWS_PER_BATCH)]
        query = "SELECT count(*), count(DISTINCT (host, ts, gpu_index)) FROM gpu_samples"
        rows = eventually(lambda: reader.connect(on_disk).execute(query).fetchall(), expected)
        assert rows == expected
    finally:
        server.stop()
