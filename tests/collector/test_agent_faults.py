"""Faults end to end, with real HTTP on loopback: ingest goes away under load and comes back (every
sample arrives exactly once, in order), and an agent killed with SIGKILL loses nothing it spooled.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from collector.agent import build_agent
from collector.backoff import Backoff
from fleetscope.settings import load_settings

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def wait_until(condition: Callable[[], bool], what: str, limit_s: float = 60.0) -> None:
    """Poll until `condition` holds; fails (naming `what`) only if it never does."""
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"never happened: {what}")
        time.sleep(0.02)


def test_ingest_outage_under_load_loses_and_duplicates_nothing(
    tmp_path: Path, exporter: Any, ingest: Any
) -> None:
    settings = load_settings(env={}).with_overrides(
        agent__dcgm_url=exporter.url, agent__ingest_url=ingest.url, agent__token="t0ken",
        agent__spool_dir=str(tmp_path / "spool"), agent__batch_max_rows=40,
        agent__ship_interval_s=1.0, agent__host="node-a", agent__cgroup_root="",
        agent__proc_root="",
    )  # fmt: skip
    agent = build_agent(settings)
    agent.host_source = None
    agent.shipper.backoff = Backoff(base_s=0.01, cap_s=0.05)
    ticks = iter(range(1, 10_000))
    tick_no = [0]

    def wall() -> float:
        return 1_700_000_000.0 + tick_no[0]

    agent.wall_clock = wall
    agent.monotonic = lambda: float(tick_no[0])
    stop = threading.Event()
    sender = threading.Thread(target=agent.shipper.run, args=(stop, 0.01), daemon=True)
    sender.start()

    def scrape(n: int) -> None:
        for _ in range(n):
            tick_no[0] = next(ticks)
            assert len(agent.tick()) == 8

    scrape(30)
    wait_until(lambda: agent.shipper.spool.depth == 0, "first batches shipped")
    ingest.stop()  # ingest down: the agent keeps scraping into the spool
    scrape(60)
    wait_until(
        lambda: agent.metrics.errors.labels("ingest_unreachable")._value.get() >= 3, "retries"
    )
    assert agent.shipper.spool.depth >= 10
    ingest.start()  # same port: ingest is back
    scrape(30)
    for batch in agent.batcher.flush():
        assert batch.table == "gpu_samples"
    agent.shipper.wakeup.set()
    wait_until(lambda: agent.shipper.spool.depth == 0, "spool drained after recovery")
    stop.set()
    sender.join()

    table = ingest.rows("gpu_samples")
    ts_s = [t // 1000 for t in table.column("ts").cast(pa.int64()).to_pylist()]
    gpus = table.column("gpu_index").to_pylist()
    expected = [(1_700_000_000 + t, g) for t in range(1, 121) for g in range(8)]
    assert list(zip(ts_s, gpus, strict=True)) == expected  # exactly once, in order
    assert set(table.column("job_id").to_pylist()) == {"918273", "918274"}
    assert set(table.column("host").to_pylist()) == {"node-a"}


def _agent_env(tmp_path: Path, exporter_url: str, ingest_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "FLEETSCOPE_AGENT_DCGM_URL": exporter_url,
        "FLEETSCOPE_AGENT_INGEST_URL": ingest_url,
        "FLEETSCOPE_AGENT_TOKEN": "t0ken",
        "FLEETSCOPE_AGENT_SPOOL_DIR": str(tmp_path / "spool"),
        "FLEETSCOPE_AGENT_INTERVAL_S": "0.1",
        "FLEETSCOPE_AGENT_SHIP_INTERVAL_S": "0.2",
        "FLEETSCOPE_AGENT_METRICS_PORT": "0",
        "FLEETSCOPE_AGENT_BACKOFF_MAX_S": "0.2",
        "FLEETSCOPE_AGENT_PROC_ROOT": "",
        "FLEETSCOPE_AGENT_HOST": "node-k",
        "FLEETSCOPE_CONFIG": "",
    }


def test_sigkill_loses_nothing_that_was_spooled(tmp_path: Path, exporter: Any, ingest: Any) -> None:
    port = ingest.port
    ingest.stop()  # down from the start: every batch stays in the spool
    env = _agent_env(tmp_path, exporter.url, f"http://127.0.0.1:{port}")
    command = [sys.executable, "-m", "collector.cli", "run"]
    agent = subprocess.Popen(
        command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    spool = tmp_path / "spool"
    wait_until(lambda: len(list(spool.glob("*.gpu_samples.*.arrow"))) >= 5, "batches spooled")
    agent.send_signal(signal.SIGKILL)
    agent.wait()
    in_order = [name.split(".")[2] for name in sorted(p.name for p in spool.glob("*.arrow"))]
    spooled = set(in_order)
    assert len(spooled) >= 5

    ingest.start()
    restarted = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        wait_until(lambda: spooled <= ingest.state.seen, "spooled batches replayed")
    finally:
        restarted.send_signal(signal.SIGTERM)
        _, err = restarted.communicate(timeout=30)
        assert agent.stderr is not None
        agent.stderr.close()
    assert restarted.returncode == 0, err.decode()
    ids = [b.batch_id for b in ingest.state.batches]
    assert len(ids) == len(set(ids))
    assert ids[: len(in_order)] == in_order  # replayed first, oldest first
