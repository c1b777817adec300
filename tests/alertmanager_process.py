"""A real Alertmanager (Debian's `prometheus-alertmanager`, 0.25) for the tests that need one:
started on a free loopback port with the config the test writes and clustering off, ready once
`/-/ready` answers 200, stopped with SIGTERM."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from app.supervise import free_port

ALERTMANAGER = (
    shutil.which("prometheus-alertmanager")
    or shutil.which("alertmanager")
    or "/usr/bin/prometheus-alertmanager"
)


def start_alertmanager(tmp_path: Path, config_text: str) -> tuple[subprocess.Popen[bytes], str]:
    """The process and its URL, once ready; its log is tmp_path/alertmanager.log."""
    if not os.path.exists(ALERTMANAGER):
        pytest.skip("alertmanager is not installed (Debian package `prometheus-alertmanager`)")
    config = tmp_path / "alertmanager.yml"
    config.write_text(config_text)
    port = free_port()
    with (tmp_path / "alertmanager.log").open("w") as log:
        proc = subprocess.Popen(
            [
                ALERTMANAGER,
                f"--config.file={config}",
                f"--storage.path={tmp_path / 'alertmanager-data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--cluster.listen-address=",  # no gossip port: a single, local Alertmanager
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as answer:
                if answer.status == 200:
                    return proc, url
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError((tmp_path / "alertmanager.log").read_text())
        time.sleep(0.1)


def stop_alertmanager(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
