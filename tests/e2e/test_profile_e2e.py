"""On-demand profiling end to end (issue 4), every process the real one.

`fleetscope server` (tmp data dir, free port, token), `fleetscope simulate` for one host (the
agent's dcgm-exporter), `fleetscope-agent run` (tmp SDK socket), a real PyTorch training process
whose Dataset sleeps (tests/e2e/sleepy_trainer.py, instrumented with collector.sdk), then
`fleetscope profile` as a user runs it. Asserts that the trace comes back analyzed with the
data-loader stall (T8), that the job's step metrics reached the warehouse through the agent, and
the two errors a user meets first: an unknown job, and a job with no instrumented process (the
error says what the agents do run).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from app.supervise import Supervisor, free_port, http_ok, wait_until
from fleetscope.settings import load_settings
from warehouse.catalog import connect
from warehouse.catalog.profiling import get_trace_analysis
from warehouse.read import reader
from warehouse.storage.paths import WarehousePaths

pytestmark = [pytest.mark.slow, pytest.mark.real_component("torch")]
pytest.importorskip("torch", reason="the training process is real PyTorch")

TOKEN = "profile-e2e-token"
JOB = "e2e-train-42"
HOST = "e2e-node-1"
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _bin(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def _profile(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_bin("fleetscope"), "profile", "--server", url, "--token", TOKEN, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "FLEETSCOPE_CONFIG": os.devnull},
    )


def _step_rows(data_dir: Path) -> list[tuple[str, str, int]]:
    settings = load_settings(env={"FLEETSCOPE_CORE_DATA_DIR": str(data_dir)})
    rows = (
        reader.connect(settings)
        .execute(
            "SELECT host, job_id, rank FROM step_samples WHERE job_id = ? ORDER BY step", [JOB]
        )
        .fetchall()
    )
    return [(str(h), str(j), int(r)) for h, j, r in rows]


def _post_job(url: str, job_id: str) -> None:
    request = urllib.request.Request(
        f"{url}/v1/jobs",
        data=json.dumps([{"job_id": job_id, "user": "alice"}]).encode(),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        assert resp.status == 200


def test_a_profile_request_comes_back_with_the_data_loader_stall(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    sock_dir = Path(f"/tmp/fs-e2e-{os.getpid()}")  # AF_UNIX paths must stay under 108 bytes
    sock_dir.mkdir(exist_ok=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        "FLEETSCOPE_CONFIG": os.devnull,
        "FLEETSCOPE_CORE_DATA_DIR": str(data_dir),
        "FLEETSCOPE_SERVER_TOKENS": TOKEN,
        "FLEETSCOPE_WAREHOUSE_FLUSH_INTERVAL_S": "0.2",
        "FLEETSCOPE_SERVER_PROFILE_MATCH_TIMEOUT_S": "3",
        "FLEETSCOPE_SIMULATOR_SCRAPE_FAILURE_RATE": "0",
        "PYTHONPATH": str(ROOT),
    }
    try:
        with Supervisor(log_dir=tmp_path / "logs") as supervisor:
            supervisor.start("server", [_bin("fleetscope"), "server", "--port", str(port)], env)
            simulator = supervisor.start(
                "simulator",
                [_bin("fleetscope"), "simulate", "--hosts", "1", "--base-port", "0"],
                env,
            )
            wait_until(http_ok(f"{url}/healthz"), 60, "server", supervisor.check_alive)
            log = tmp_path / "logs" / "simulator.log"
            wait_until(
                lambda: "/metrics" in log.read_text(), 30, "simulator", supervisor.check_alive
            )
            exporter = next(
                line.split()[1] for line in log.read_text().splitlines() if "/metrics" in line
            )
            agent_env = {
                **env,
                "FLEETSCOPE_AGENT_HOST": HOST,
                "FLEETSCOPE_AGENT_DCGM_URL": exporter,
                "FLEETSCOPE_AGENT_INGEST_URL": url,
                "FLEETSCOPE_AGENT_TOKEN": TOKEN,
                "FLEETSCOPE_AGENT_INTERVAL_S": "0.5",
                "FLEETSCOPE_AGENT_SHIP_INTERVAL_S": "0.5",
                "FLEETSCOPE_AGENT_PROFILE_POLL_S": "0.3",
                "FLEETSCOPE_AGENT_SPOOL_DIR": str(tmp_path / "spool"),
                "FLEETSCOPE_AGENT_METRICS_PORT": "0",
                "FLEETSCOPE_AGENT_SDK_SOCKET": str(sock_dir / "agent.sock"),
            }
            supervisor.start("agent", [_bin("fleetscope-agent"), "run"], agent_env)
            wait_until(
                lambda: (sock_dir / "agent.sock").exists(), 30, "agent", supervisor.check_alive
            )
            trainer_env = {
                "FLEETSCOPE_AGENT_SDK_SOCKET": str(sock_dir / "agent.sock"),
                "FLEETSCOPE_JOB_ID": JOB,
                "RANK": "0",
                "PYTHONPATH": str(ROOT),
            }
            supervisor.start(
                "trainer", [sys.executable, str(HERE / "sleepy_trainer.py"), "120"], trainer_env
            )

            # Step metrics flow training process -> agent -> spool -> ingest -> warehouse.
            wait_until(
                lambda: len(_step_rows(data_dir)) >= 5, 60, "step_samples", supervisor.check_alive
            )
            assert {(h, j, r) for h, j, r in _step_rows(data_dir)} == {(HOST, JOB, 0)}

            done = _profile(url, "--job", JOB, "--steps", "5", "--timeout", "60")
            assert done.returncode == 0, done.stdout + done.stderr
            assert f"matched: {HOST} pid" in done.stderr
            assert f"profile request 1 for job {JOB}: done" in done.stdout
            t8 = [line for line in done.stdout.splitlines() if line.strip().startswith("[T8 ")]
            assert len(t8) == 1 and "data-loader bound" in t8[0], done.stdout
            assert "rank 0: 5 steps" in done.stdout
            traces = list((data_dir / "traces").glob("req1-*.pt.trace.json.gz"))
            assert len(traces) == 1
            # analysed once on upload, the whole analysis stored in the catalog for the dashboard
            settings = load_settings(env={"FLEETSCOPE_CORE_DATA_DIR": str(data_dir)})
            engine = connect(WarehousePaths.from_settings(settings).catalog_url)
            with engine.connect() as conn:
                document = get_trace_analysis(conn, traces[0].name.split(".")[0])
            engine.dispose()
            assert document is not None and any(f["rule_id"] == "T8" for f in document["findings"])

            unknown = _profile(url, "--job", "no-such-job", "--steps", "5")
            assert unknown.returncode == 6
            assert "unknown job 'no-such-job'" in unknown.stderr

            _post_job(url, "idle-job")  # known to the catalog, but no process of it reports steps
            idle = _profile(
                url, "--job", "idle-job", "--rank", "1", "--steps", "5", "--timeout", "60"
            )
            assert idle.returncode == 9
            assert (
                f"no processes matched job idle-job rank 1 within 3 s "
                f"(server.profile_match_timeout_s); agents polling: {HOST} (jobs: {JOB}[ranks 0])"
            ) in idle.stderr
            supervisor.stop(simulator)
    finally:
        shutil.rmtree(sock_dir, ignore_errors=True)
