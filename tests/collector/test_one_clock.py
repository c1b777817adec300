"""One clock per sample (issue 13): when the exporter stamps its samples (a replay a day late),
the host rows scraped with them follow the exporter's time base, not the agent's wall clock.
Real exporter page over real HTTP, real psutil host source, real spool."""

from __future__ import annotations

import re
from pathlib import Path

from collector.agent import build_agent
from fleetscope.contract import from_ipc
from fleetscope.settings import load_settings

from .conftest import Exporter, dcgm_text

WALL_S = 1_750_000_000.0  # the agent's clock
DAY_MS = 86_400_000


def stamped(text: str, ts_ms: int) -> str:
    """The real page with an exposition timestamp on every sample line."""
    return re.sub(r"^(DCGM_\w+\{.*\} \S+)$", rf"\1 {ts_ms}", text, flags=re.M)


def test_host_rows_follow_the_exporters_timestamps(tmp_path: Path) -> None:
    replay_ms = int(WALL_S * 1000) - DAY_MS
    exporter = Exporter(stamped(dcgm_text("h100_k8s_release"), replay_ms))
    try:
        settings = load_settings(env={}).with_overrides(
            agent__dcgm_url=exporter.url,
            agent__spool_dir=str(tmp_path / "spool"),
            agent__ingest_url="http://127.0.0.1:9",
            agent__slurm_job_dir="",
        )
        agent = build_agent(settings)
        agent.wall_clock = lambda: WALL_S
        agent.tick()
        agent.batcher.flush()
        tables: dict[str, list[int]] = {}
        for batch in agent.shipper.spool.pending():
            body = agent.shipper.spool.read(batch)
            assert body is not None
            table = from_ipc(body)
            ts = table.column("ts").cast("int64").to_pylist()
            tables.setdefault(batch.table, []).extend(ts)
        for close in agent.closers:
            close()
    finally:
        exporter.close()
    assert set(tables["gpu_samples"]) == {replay_ms}
    assert set(tables["host_samples"]) == {replay_ms}
