"""The agent starts under a read-only root with its default paths, as the DaemonSet and the systemd
unit run it: a private mount namespace (`unshare -m`) with the whole root bound read-only, the
working directory `/`, and only the declared volumes writable (`/run` for the SDK socket,
`/var/lib` for the spool: deploy/kubernetes's emptyDir/hostPath volumes, systemd's
RuntimeDirectory/StateDirectory). The old relative default (`var/agent.sock`) fails there with
the error the issue reported, which is what makes this test mean something.

Needs root (mount namespaces); CI runs as root.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.supervise import free_port
from simulator.fleet import FleetSpec
from simulator.serve import ExporterFleet
from simulator.sim import FleetSimulator

pytestmark = [pytest.mark.slow, pytest.mark.real_component("unshare")]

AGENT = Path(sys.executable).parent / "fleetscope-agent"


def readonly_root_command(tmp_path: Path, env: dict[str, str]) -> list[str]:
    """`unshare` running the agent chrooted into a read-only bind of `/`, two volumes writable."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and util-linux unshare for a private mount namespace")
    new_root = tmp_path / "root"
    for folder in ("root", "run", "state"):
        (tmp_path / folder).mkdir()
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    script = f"""
        set -e
        mount --rbind / {new_root}
        mount -o remount,bind,ro {new_root}
        mount --bind {tmp_path / "run"} {new_root}/run
        mount --bind {tmp_path / "state"} {new_root}/var/lib
        cd /
        exec chroot {new_root} /usr/bin/env -i HOME=/nonexistent PATH=/usr/bin:/bin {exports} \
            sh -c 'cd / && exec {AGENT} run'
    """
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", script]


@pytest.fixture
def exporter() -> Iterator[str]:
    now = int(time.time())
    spec = FleetSpec(hosts=1, seed=3, scrape_failure_rate=0.0)
    sim = FleetSimulator(spec, origin_s=now // 3600 * 3600, horizon_s=2 * 3600)
    fleet = ExporterFleet(sim, time.time).start()
    (url,) = fleet.urls().values()
    yield url
    fleet.stop()


def agent_env(exporter: str, port: int, **extra: str) -> dict[str, str]:
    return {
        "FLEETSCOPE_CONFIG": "",
        "FLEETSCOPE_AGENT_DCGM_URL": exporter,
        "FLEETSCOPE_AGENT_INGEST_URL": f"http://127.0.0.1:{free_port()}",  # down: agent spools
        "FLEETSCOPE_AGENT_TOKEN": "t",
        "FLEETSCOPE_AGENT_INTERVAL_S": "0.2",
        "FLEETSCOPE_AGENT_SHIP_INTERVAL_S": "0.2",
        "FLEETSCOPE_AGENT_METRICS_PORT": str(port),
        "FLEETSCOPE_AGENT_HOST": "node-ro",
        **extra,
    }


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def test_agent_runs_under_a_readonly_root_with_default_paths(tmp_path: Path, exporter: str) -> None:
    port = free_port()
    agent = subprocess.Popen(
        readonly_root_command(tmp_path, agent_env(exporter, port)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    spool = tmp_path / "state" / "fleetscope" / "spool"
    try:
        deadline = time.monotonic() + 60
        while not (healthy(port) and list(spool.glob("*.gpu_samples.*.arrow"))):
            assert agent.poll() is None, agent.communicate()[1]
            assert time.monotonic() < deadline, "agent not healthy with a spooled batch in 60 s"
            time.sleep(0.1)
        # The SDK socket is bound at its default path on the runtime volume.
        assert (tmp_path / "run" / "fleetscope" / "agent.sock").is_socket()
    finally:
        agent.terminate()
        _, stderr = agent.communicate(timeout=30)
    assert agent.returncode == 0, stderr
    assert "Read-only file system" not in stderr


def test_a_relative_socket_path_fails_under_a_readonly_root_with_the_setting_named(
    tmp_path: Path, exporter: str
) -> None:
    env = agent_env(exporter, 0, FLEETSCOPE_AGENT_SDK_SOCKET="var/agent.sock")
    result = subprocess.run(
        readonly_root_command(tmp_path, env), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "agent.sdk_socket: cannot bind var/agent.sock" in result.stderr
    assert "Read-only file system" in result.stderr
