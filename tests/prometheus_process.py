"""A real Prometheus server (Debian's `prometheus`) for the tests that need one: started on a
free loopback port with a config the test writes, ready once `/-/ready` answers 200, stopped with
SIGTERM so it flushes its remote_write queues before exiting."""

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

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


def start_prometheus(tmp_path: Path, config_text: str) -> tuple[subprocess.Popen[bytes], str]:
    """The process and its URL, once ready; its log is tmp_path/prometheus.log."""
    if not os.path.exists(PROMETHEUS):
        pytest.skip("prometheus is not installed (Debian package `prometheus`)")
    config = tmp_path / "prometheus.yml"
    config.write_text(config_text)
    port = free_port()
    with (tmp_path / "prometheus.log").open("w") as log:  # the child keeps its own copy
        proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
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
            raise AssertionError((tmp_path / "prometheus.log").read_text())
        time.sleep(0.1)


def stop_prometheus(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)  # flushes remote_write queues before exiting
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
