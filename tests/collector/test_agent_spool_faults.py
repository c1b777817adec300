"""The owed agent-side cases of issue 28, with real processes and a real server process:
an agent `kill -9`'d mid-ship, truncated and corrupt spool files, and a spool at its size cap.

Every case ends with the warehouse read back: each acknowledged row stored exactly once.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.fuzz import free_port, start_server
from collector.backoff import Backoff
from collector.http import UrllibTransport
from collector.metrics import AgentMetrics
from collector.shipper import Shipper
from collector.spool import Spool
from fleetscope.contract import to_ipc
from simulator.maker.batches import EPOCH_MS, gpu_batch

TOKEN = "agent-faults-token-0123456789abcdef"
SHIP_SPOOL = Path(__file__).with_name("ship_spool.py")
ROWS_PER_BATCH = 8 * 5  # gpu_batch: 8 GPUs x 5 timestamps


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    data = tmp_path / "data"
    process, url = start_server(data, TOKEN)
    try:
        yield process, url, data
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(60)


def stored_rows(process: subprocess.Popen[bytes], data: Path) -> tuple[int, int]:
    """(rows, distinct (host, gpu, ts)) in the warehouse, read after a clean stop."""
    from warehouse.read.reader import open_segments

    process.terminate()
    process.wait(60)
    conn = open_segments(data / "segments")
    rows, distinct = conn.execute(
        "SELECT count(*), count(DISTINCT (host, gpu_index, ts)) FROM gpu_samples"
    ).fetchall()[0]
    return int(rows), int(distinct)


def seal(spool: Spool, batches: int, host: str = "h") -> None:
    for n in range(batches):
        batch = gpu_batch(host, start_ms=EPOCH_MS + n * 5000, timestamps=5)
        spool.put("gpu_samples", to_ipc(batch))


def shipper_for(spool: Spool, url: str) -> Shipper:
    return Shipper(
        spool, ingest_url=url, token=TOKEN, agent_name="h", transport=UrllibTransport(),
        metrics=AgentMetrics(), timeout_s=30, backoff=Backoff(base_s=0.01, cap_s=0.05),
    )  # fmt: skip


def spooled(root: Path) -> int:
    return sum(1 for p in root.glob("*.arrow"))


def test_an_agent_killed_mid_ship_loses_and_duplicates_nothing(
    tmp_path: Path, server: tuple[subprocess.Popen[bytes], str, Path]
) -> None:
    process, url, data = server
    root = tmp_path / "spool"
    sealed = 30
    seal(Spool(root, max_bytes=10**9), sealed)
    argv = [sys.executable, str(SHIP_SPOOL), str(root), url, TOKEN]
    agent = subprocess.Popen(argv)
    deadline = time.monotonic() + 120
    while spooled(root) > sealed - 3 and time.monotonic() < deadline:
        time.sleep(0.005)
    agent.send_signal(signal.SIGKILL)
    agent.wait()
    assert 0 < spooled(root) < sealed  # killed while shipping, not before or after
    subprocess.run(argv, timeout=300, check=True)  # the restarted agent
    assert spooled(root) == 0
    assert stored_rows(process, data) == (sealed * ROWS_PER_BATCH, sealed * ROWS_PER_BATCH)


def test_truncated_and_corrupt_spool_files_are_quarantined_and_the_rest_shipped(
    tmp_path: Path,
    server: tuple[subprocess.Popen[bytes], str, Path],
    caplog: pytest.LogCaptureFixture,
) -> None:
    process, url, data = server
    root = tmp_path / "spool"
    spool = Spool(root, max_bytes=10**9)
    seal(spool, 2)
    whole = to_ipc(gpu_batch("h", start_ms=EPOCH_MS + 10 * 5000, timestamps=5))
    truncated = spool.put("gpu_samples", whole[: len(whole) // 2])
    corrupt = spool.put("gpu_samples", bytes(b ^ 0x5A for b in whole))
    empty = spool.put("gpu_samples", b"")
    seal_after = gpu_batch("h", start_ms=EPOCH_MS + 20 * 5000, timestamps=5)
    spool.put("gpu_samples", to_ipc(seal_after))
    reopened = Spool(root, max_bytes=10**9)  # an agent restart reads the damaged files back
    with caplog.at_level(logging.ERROR, logger="collector.shipper"):
        assert shipper_for(reopened, url).drain()
    dead = sorted(p.name for p in (root / "dead").iterdir())
    expected = [b.path.name for b in (truncated, corrupt, empty)]
    assert dead == sorted([*expected, *(n + ".reason" for n in expected)])
    refused = [r.getMessage() for r in caplog.records if "refused batch" in r.getMessage()]
    assert len(refused) == 3 and all("(HTTP 400)" in line for line in refused)
    assert spooled(root) == 0
    assert stored_rows(process, data) == (3 * ROWS_PER_BATCH, 3 * ROWS_PER_BATCH)


def test_a_full_spool_drops_the_oldest_counts_them_and_ships_the_rest(
    tmp_path: Path,
    server: tuple[subprocess.Popen[bytes], str, Path],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Ingest unreachable while 10 batches are sealed into a spool capped at about 4 of them:
    the 6 oldest are dropped (warned, counted in fleetscope_agent_batches_dropped_total), and
    once ingest is back the 4 newest are stored."""
    process, url, data = server
    size = len(to_ipc(gpu_batch("h", timestamps=5)))
    spool = Spool(tmp_path / "spool", max_bytes=4 * size + size // 2)
    down = shipper_for(spool, f"http://127.0.0.1:{free_port()}")
    with caplog.at_level(logging.WARNING, logger="collector.spool"):
        seal(spool, 10)
    assert not down.drain()  # unreachable: retry later
    assert spool.depth == 4 and spool.dropped == 6
    assert sum("dropped the oldest batch" in r.getMessage() for r in caplog.records) == 6
    assert down.metrics.registry.get_sample_value("fleetscope_agent_batches_dropped_total") == 6
    up = shipper_for(spool, url)
    assert up.drain()
    assert stored_rows(process, data) == (4 * ROWS_PER_BATCH, 4 * ROWS_PER_BATCH)
