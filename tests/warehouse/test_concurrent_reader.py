"""A second process reads the warehouse while ingest writes at full rate, without one error.

DuckDB refuses a second process on a file the writer holds (design.md), so readers go through the
published segments (warehouse.read.reader). The reader here is a separate Python process that keeps
opening fresh connections and counting rows while many threads post batches and the compactor
merges segments under it (grace period short, so retired files really are deleted meanwhile).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fleetscope.settings import Settings
from simulator.maker.batches import EPOCH_MS, gpu_batch
from simulator.wire import TEST_TOKEN as TOKEN
from simulator.wire import post_batch
from tests.readable import eventually
from warehouse.ingest.runtime import Server
from warehouse.read.reader import open_segments

READER = """
import json, sys, time
from pathlib import Path
from warehouse.read.reader import open_segments
root, stop_file = Path(sys.argv[1]), Path(sys.argv[2])
counts = []
while True:
    stopping = stop_file.exists()
    conn = open_segments(root)
    counts.append(conn.execute("SELECT count(*) FROM gpu_samples").fetchall()[0][0])
    conn.execute("SELECT host, avg(gpu_util) FROM gpu_samples GROUP BY host").fetchall()
    conn.close()
    if stopping:
        break
print(json.dumps(counts))
"""

AGENTS = 8
BATCHES = 12
ROWS = 8 * 20  # per batch


def stored_rows(server: Server) -> int:
    conn = open_segments(server.paths.segments_dir)
    try:
        return int(conn.execute("SELECT count(*) FROM gpu_samples").fetchall()[0][0])
    finally:
        conn.close()


@pytest.mark.slow
def test_reader_in_a_second_process_never_fails_while_ingest_writes(
    settings: Settings, tmp_path: Path
) -> None:
    server = Server(
        settings.with_overrides(
            warehouse__maintenance_interval_s=0.2,
            warehouse__segment_grace_s=1.0,
        )
    )
    server.start()
    stop_file = tmp_path / "stop"
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(server.paths.segments_dir), str(stop_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[2],
    )
    statuses: list[int] = []

    def agent(n: int) -> None:
        for i in range(BATCHES):
            batch = gpu_batch(f"node-{n}", start_ms=EPOCH_MS + i * 20_000, timestamps=20, seed=i)
            statuses.append(post_batch(server.url, "gpu_samples", batch, token=TOKEN).status)

    try:
        threads = [threading.Thread(target=agent, args=(n,)) for n in range(AGENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # Acknowledged rows are readable after the ingest log's next flush (<= 1 s); compact only
        # once they are all in segments, or the one file compacted may not hold the last ones.
        eventually(lambda: stored_rows(server), AGENTS * BATCHES * ROWS)
        # Compact what is left, with the reader still running. The background maintenance thread
        # may be mid-compaction too; the two converge on one file per day within a few passes.
        deadline = time.monotonic() + 30
        while True:
            server.maintenance.run_once()
            compacted = server.store.snapshot().live("gpu_samples")
            if len(compacted) == 1 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        stop_file.touch()
        out, err = reader.communicate(timeout=120)
        server.stop()
    assert reader.returncode == 0, err
    counts = json.loads(out)
    assert statuses == [202] * (AGENTS * BATCHES)
    assert len(counts) > 1
    assert counts == sorted(counts)  # never a row seen twice, never a row lost after being seen
    assert counts[-1] == AGENTS * BATCHES * ROWS
    assert len(compacted) == 1  # one UTC day, merged into one file while the reader ran
