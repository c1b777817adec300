"""The spine, end to end: simulator -> agents -> ingest over HTTP -> DuckDB -> reader.

Every process is the real one (`fleetscope simulate`, `fleetscope-agent run`, `fleetscope server`),
talking HTTP on loopback into a real DuckDB file. The simulator records every page it served; the
test re-parses those pages with prometheus_client (an independent parser) and asserts that every
GPU sample of every page served with 200 is in the warehouse exactly once, with the same values, in
the same order, across a restart of one agent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.supervise import Supervisor, free_port, http_ok, wait_until
from fleetscope.settings import load_settings
from warehouse.read import reader

pytestmark = pytest.mark.slow

TOKEN = "e2e-token"
HOSTS = 2
INTERVAL_S = 0.5
PAGES_EACH_SIDE = 10  # scrapes before and after the restart: > 10 samples of every GPU in all


def _bin(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def served_power_by_gpu(record_dir: Path) -> dict[tuple[str, int, str], list[float]]:
    """(host, gpu, GPU_I_ID) -> POWER_USAGE of every page served with 200, in serving order."""
    served: dict[tuple[str, int, str], list[float]] = defaultdict(list)
    for path in sorted(record_dir.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            if entry["status"] != 200:
                continue
            for family in text_string_to_metric_families(entry["page"]):
                if family.name != "DCGM_FI_DEV_POWER_USAGE":
                    continue
                for sample in family.samples:
                    key = (
                        entry["host"],
                        int(sample.labels["gpu"]),
                        sample.labels.get("GPU_I_ID", ""),
                    )
                    served[key].append(sample.value)
    return served


def stored_power_by_gpu(data_dir: Path) -> dict[tuple[str, int, str], list[float]]:
    settings = load_settings(env={"FLEETSCOPE_CORE_DATA_DIR": str(data_dir)})
    connection = reader.connect(settings)
    rows = connection.execute(
        """SELECT host, gpu_index, coalesce(CAST(mig_instance_id AS VARCHAR), ''), power_w
           FROM gpu_samples ORDER BY host, gpu_index, mig_instance_id, ts"""
    ).fetchall()
    connection.close()
    stored: dict[tuple[str, int, str], list[float]] = defaultdict(list)
    for host, gpu, mig, power in rows:
        stored[(host, gpu, mig)].append(power)
    return stored


def pages_served(record_dir: Path) -> dict[str, int]:
    """Host -> pages its exporter has answered so far (complete lines of its record)."""
    return {path.stem: path.read_text().count("\n") for path in record_dir.glob("*.jsonl")}


def spool_is_empty(spool: Path) -> bool:
    """No batch waits in the spool (batches are `<seq>.<table>.<batch_id>.arrow` at its top)."""
    return not list(spool.glob("*.arrow"))


def test_every_served_sample_is_stored_exactly_once_across_an_agent_restart(tmp_path: Path) -> None:
    data_dir, record_dir = tmp_path / "data", tmp_path / "served"
    server_port = free_port()
    ingest_url = f"http://127.0.0.1:{server_port}"
    base_env = {
        "FLEETSCOPE_CORE_DATA_DIR": str(data_dir),
        "FLEETSCOPE_SERVER_TOKENS": TOKEN,
        "FLEETSCOPE_WAREHOUSE_FLUSH_INTERVAL_S": "0.2",
    }
    with Supervisor(log_dir=tmp_path / "logs") as supervisor:
        supervisor.start(
            "server", [_bin("fleetscope"), "server", "--port", str(server_port)], base_env
        )
        wait_until(http_ok(f"{ingest_url}/healthz"), 60, "server", supervisor.check_alive)

        simulator = subprocess.Popen(
            [_bin("fleetscope"), "simulate", "--hosts", str(HOSTS), "--base-port", "0",
             "--record-dir", str(record_dir)],
            stdout=subprocess.PIPE, text=True, env={**os.environ, **base_env},
        )  # fmt: skip
        assert simulator.stdout is not None
        urls = [simulator.stdout.readline().split()[-1] for _ in range(HOSTS)]

        def agent_env(index: int) -> dict[str, str]:
            return {
                **base_env,
                "FLEETSCOPE_AGENT_DCGM_URL": urls[index],
                "FLEETSCOPE_AGENT_INGEST_URL": ingest_url,
                "FLEETSCOPE_AGENT_TOKEN": TOKEN,
                "FLEETSCOPE_AGENT_INTERVAL_S": str(INTERVAL_S),
                "FLEETSCOPE_AGENT_SHIP_INTERVAL_S": str(INTERVAL_S),
                "FLEETSCOPE_AGENT_SPOOL_DIR": str(tmp_path / f"spool-{index}"),
                "FLEETSCOPE_AGENT_METRICS_PORT": "0",
                "FLEETSCOPE_AGENT_SDK_SOCKET": str(tmp_path / f"agent-{index}.sock"),
            }

        agents = [
            supervisor.start(f"agent-{i}", [_bin("fleetscope-agent"), "run"], agent_env(i))
            for i in range(HOSTS)
        ]

        def agents_alive() -> None:
            for agent in agents:
                assert agent.process.poll() is None, f"{agent.name} exited: {agent.log_path}"

        # Each agent scrapes for a while (PAGES_EACH_SIDE pages from every exporter), then agent 0
        # restarts and all scrape as long again: waits on pages served, never on a clock.
        wait_until(
            lambda: (
                len(served := pages_served(record_dir)) == HOSTS
                and min(served.values()) >= PAGES_EACH_SIDE
            ),
            120,
            "every exporter scraped",
            agents_alive,
        )
        assert supervisor.stop(agents[0]) == 0  # a restart: SIGTERM seals the buffer into the spool
        before = pages_served(record_dir)
        agents[0] = supervisor.start(
            "agent-0-again", [_bin("fleetscope-agent"), "run"], agent_env(0)
        )
        wait_until(
            lambda: all(
                n >= before[host] + PAGES_EACH_SIDE for host, n in pages_served(record_dir).items()
            ),
            120,
            "every exporter scraped again after the restart",
            agents_alive,
        )

        simulator.terminate()
        assert simulator.wait(30) == 0
        simulator.stdout.close()
        for index in range(HOSTS):
            spool = tmp_path / f"spool-{index}"
            wait_until(lambda spool=spool: spool_is_empty(spool), 30, f"spool {index} drained")
        for agent in agents:
            assert supervisor.stop(agent) == 0
        # What the agents sealed on the way out is in their spools; one more run ships it.
        drains = [
            supervisor.start(f"drain-{i}", [_bin("fleetscope-agent"), "run"], agent_env(i))
            for i in range(HOSTS)
        ]
        for index in range(HOSTS):
            spool = tmp_path / f"spool-{index}"
            wait_until(lambda spool=spool: spool_is_empty(spool), 30, f"spool {index} drained")
        for agent in drains:
            supervisor.stop(agent)

    served = served_power_by_gpu(record_dir)
    stored = stored_power_by_gpu(data_dir)
    assert sum(len(v) for v in served.values()) > HOSTS * 8 * 10
    assert stored == served
