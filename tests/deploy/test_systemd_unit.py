"""deploy/systemd/fleetscope-agent.service passes `systemd-analyze verify`, and the agent runs inside
the sandbox the unit asks for: ProtectSystem=strict (the whole tree read-only but /dev, /proc and
/sys), StateDirectory= and RuntimeDirectory= writable, PrivateTmp=, WorkingDirectory=/, the unit's
Environment= lines and its ExecStart arguments. There is no systemd as PID 1 here, so the sandbox
is built the way systemd builds it: a private mount namespace with a read-only bind of `/` and
writable binds of exactly those directories (/var/lib and /run stay read-only around them).

The unit's ExecStart names /opt/fleetscope/bin/fleetscope-agent and /etc/fleetscope/agent.toml,
which are not installed here: the checks substitute this checkout's fleetscope-agent (both checks)
and a config file in the private /tmp (the sandbox run), and change nothing else.
"""

from __future__ import annotations

import configparser
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
from tests.collector.test_readonly_root import exporter  # noqa: F401  (fixture)

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "deploy" / "systemd" / "fleetscope-agent.service"
INSTALLED = "/opt/fleetscope/bin/fleetscope-agent"
AGENT = str(Path(sys.executable).parent / "fleetscope-agent")


def service() -> configparser.SectionProxy:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read_string(UNIT.read_text())
    return unit["Service"]


@pytest.mark.real_component("systemd-analyze")
def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian package `systemd`)")
    text = UNIT.read_text()
    assert text.count(INSTALLED) == 1
    copy = tmp_path / UNIT.name
    copy.write_text(text.replace(INSTALLED, AGENT))
    result = subprocess.run(
        [analyze, "verify", str(copy)], capture_output=True, text=True, check=False, timeout=60
    )
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_the_unit_confines_writes_to_state_and_runtime_directories() -> None:
    unit = service()
    assert unit["ProtectSystem"] == "strict" and unit["PrivateTmp"] == "true"
    assert unit["WorkingDirectory"] == "/"
    assert (unit["StateDirectory"], unit["RuntimeDirectory"]) == ("fleetscope", "fleetscope")
    assert "ReadWritePaths" not in unit


@pytest.fixture
def sandbox_root(tmp_path: Path) -> Iterator[Path]:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and util-linux unshare for a private mount namespace")
    for folder in ("root", "state", "runtime", "tmp", "job-map"):
        (tmp_path / folder).mkdir()
    yield tmp_path


@pytest.mark.slow
@pytest.mark.real_component("unshare")
def test_agent_runs_in_the_units_protect_system_strict_sandbox(
    sandbox_root: Path,
    exporter: str,  # noqa: F811
) -> None:
    unit, root, port = service(), sandbox_root, free_port()
    (root / "job-map" / "0").write_text("918273\n")  # what the Slurm prolog writes
    config = root / "tmp" / "agent.toml"  # seen as /tmp/agent.toml (/etc/fleetscope is not here)
    config.write_text(
        "[agent]\n"
        f'dcgm_url = "{exporter}"\n'
        f'ingest_url = "http://127.0.0.1:{free_port()}"\n'  # down: the agent spools
        'token = "t"\ninterval_s = 0.2\nship_interval_s = 0.2\n'
        f'metrics_port = {port}\nhost = "node-sd"\nproc_root = ""\n'
    )
    command = shlex.split(unit["ExecStart"].replace(INSTALLED, AGENT))
    command[command.index("--config") + 1] = "/tmp/agent.toml"
    env = [
        line.split("=", 1)[1]
        for line in UNIT.read_text().splitlines()
        if line.startswith("Environment=")
    ]
    new = root / "root"
    state, runtime = unit["StateDirectory"], unit["RuntimeDirectory"]
    # The private /tmp hides everything under the real /tmp; a checkout or venv there (a CI clone
    # in /tmp) stands in for /opt/fleetscope, so it stays visible, read-only like any install.
    installs = sorted({p for p in (str(REPO), sys.prefix) if p.startswith("/tmp/")})
    keep_installs = "\n".join(
        f"mkdir -p {new}{p} && mount --bind {p} {new}{p} && mount -o remount,bind,ro {new}{p}"
        for p in installs
    )
    script = f"""
        set -e
        mount --rbind / {new}
        mount -o remount,bind,ro {new}
        mount -t tmpfs tmpfs {new}/var/lib && mkdir {new}/var/lib/{state}
        mount --bind {root / "state"} {new}/var/lib/{state}
        mount -o remount,ro {new}/var/lib
        mount -t tmpfs tmpfs {new}/run && mkdir {new}/run/{runtime} {new}/run/dcgm-job-map
        mount --bind {root / "runtime"} {new}/run/{runtime}
        mount --bind -o ro {root / "job-map"} {new}/run/dcgm-job-map
        mount -o remount,ro {new}/run
        mount --bind {root / "tmp"} {new}/tmp
        {keep_installs}
        exec chroot {new} /usr/bin/env -i PATH=/usr/bin:/bin {" ".join(shlex.quote(e) for e in env)} \
            sh -c 'cd {unit["WorkingDirectory"]} && exec {shlex.join(command)}'
    """
    agent = subprocess.Popen(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    spool = root / "state" / "spool"
    try:
        deadline = time.monotonic() + 60
        while not list(spool.glob("*.gpu_samples.*.arrow")):
            assert agent.poll() is None, agent.communicate()[1]
            assert time.monotonic() < deadline, "no batch spooled in 60 s"
            time.sleep(0.1)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
            assert answer.status == 200
        assert (root / "runtime" / "agent.sock").is_socket()
    finally:
        agent.terminate()
        _, stderr = agent.communicate(timeout=30)
    assert agent.returncode == 0, stderr
    assert "Read-only file system" not in stderr
