"""The closed loop end to end (issue 18), every process the real one: `fleetscope server` with
the autoprofile plug-in on, `fleetscope-agent run`, and a real PyTorch training process with the
SDK attached whose DataLoader stalls (sleepy_trainer.py). A P1 data-loader-stall finding on the
job (stored as the analyzers store it) makes the server request a short profile by itself; the
real process records it, the trace is analyzed, and the finding's chain holds the trace's
evidence: the T8 finding and the what-if price of more DataLoader workers."""

from __future__ import annotations

import os
import shutil
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from analyzers.findings import Finding, Severity
from analyzers.run.results import to_catalog
from app.supervise import Supervisor, free_port, http_ok, wait_until
from fleetscope.settings import load_settings
from warehouse import catalog
from warehouse.catalog import autoprofile as chain
from warehouse.catalog import findings as cat
from warehouse.storage.paths import WarehousePaths

pytestmark = [pytest.mark.slow, pytest.mark.real_component("torch")]
pytest.importorskip("torch", reason="the training process is real PyTorch")

TOKEN = "autoprofile-e2e-token"
JOB = "e2e-stall-7"
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _bin(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def test_a_stall_finding_profiles_the_real_process_and_shows_the_evidence(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    sock_dir = Path(f"/tmp/fs-ap-{os.getpid()}")  # AF_UNIX paths must stay under 108 bytes
    sock_dir.mkdir(exist_ok=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        "FLEETSCOPE_CONFIG": os.devnull,
        "FLEETSCOPE_CORE_DATA_DIR": str(data_dir),
        "FLEETSCOPE_SERVER_TOKENS": TOKEN,
        "FLEETSCOPE_SERVER_PLUGINS": "analyzers.traces.service,analyzers.autoprofile.plugin",
        "FLEETSCOPE_AUTOPROFILE_ENABLED": "true",
        "FLEETSCOPE_AUTOPROFILE_TICK_S": "0.5",
        "FLEETSCOPE_AUTOPROFILE_PERIODIC": "false",
        "PYTHONPATH": str(ROOT),
    }
    settings = load_settings(env=env)
    engine = catalog.connect(WarehousePaths.from_settings(settings).catalog_url)
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    stall = Finding(
        "P1", Severity.CRITICAL, JOB, "node-1", ("0",), hour, hour + timedelta(hours=1),
        "data-loader stall", "raise num_workers", 0.5, "data wait share x GPU-hours",
        {"data_wait_share": 0.5},
    )  # fmt: skip
    with engine.begin() as conn:
        cat.upsert_findings(conn, [to_catalog(stall)], run_id="analyzers")
    try:
        with Supervisor(log_dir=tmp_path / "logs") as supervisor:
            supervisor.start("server", [_bin("fleetscope"), "server", "--port", str(port)], env)
            wait_until(http_ok(f"{url}/healthz"), 60, "server", supervisor.check_alive)
            agent_env = {
                **env,
                "FLEETSCOPE_AGENT_HOST": "node-1",
                "FLEETSCOPE_AGENT_DCGM_URL": f"http://127.0.0.1:{free_port()}/metrics",
                "FLEETSCOPE_AGENT_INGEST_URL": url,
                "FLEETSCOPE_AGENT_TOKEN": TOKEN,
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

            def refined() -> bool:
                supervisor.check_alive()
                with engine.connect() as conn:
                    links = chain.auto_profiles_of(conn, finding_id=stall.finding_id)
                return bool(links) and links[0].evidence is not None

            deadline = time.monotonic() + 120
            while not refined():
                assert time.monotonic() < deadline, "no refined chain within 120 s"
                time.sleep(0.2)
    finally:
        shutil.rmtree(sock_dir, ignore_errors=True)
    with engine.connect() as conn:
        (link,) = chain.auto_profiles_of(conn, finding_id=stall.finding_id)
        stored = {f.rule_id for f in cat.list_findings(conn, job_id=JOB)}
    evidence = link.evidence or {}
    assert (link.reason, link.rule_id, link.request_id) == ("triggered", "P1", 1)
    assert [f["rule_id"] for f in evidence["trace_findings"]] == ["T8"]
    price = evidence["price"]
    assert price["scenario"] == "dataloader_workers"
    assert price["estimated_step_ms"] < price["step_ms"]
    assert stored == {"P1", "T8"}
