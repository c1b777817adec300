"""A real Prometheus (Debian's `prometheus`) or Alertmanager (`prometheus-alertmanager`, 0.25) for
the tests that need one: started on a free loopback port with a config the test writes, ready once
`/-/ready` answers 200, stopped with SIGTERM (Prometheus flushes its remote_write queues before
exiting). Both are the same kind of Go server with the same flags for config, storage and address;
only the binary and the storage flag's name differ."""

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
ALERTMANAGER = (
    shutil.which("prometheus-alertmanager")
    or shutil.which("alertmanager")
    or "/usr/bin/prometheus-alertmanager"
)
READY_WITHIN_S = 60.0  # a Go binary's start on a busy 2-core machine, TSDB replay included


def _start(
    binary: str, package: str, name: str, tmp_path: Path, config_text: str, *flags: str
) -> tuple[subprocess.Popen[bytes], str]:
    if not os.path.exists(binary):
        pytest.skip(f"{name} is not installed (Debian package `{package}`)")
    config = tmp_path / f"{name}.yml"
    config.write_text(config_text)
    port = free_port()
    log_path = tmp_path / f"{name}.log"
    with log_path.open("w") as log:  # the child keeps its own copy
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                *flags,
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + READY_WITHIN_S
    while True:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as answer:
                if answer.status == 200:
                    return proc, url
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise AssertionError(f"{name} was not ready:\n{log_path.read_text()}")
        time.sleep(0.05)


def start_prometheus(tmp_path: Path, config_text: str) -> tuple[subprocess.Popen[bytes], str]:
    """The process and its URL, once ready; its log is tmp_path/prometheus.log."""
    return _start(
        PROMETHEUS,
        "prometheus",
        "prometheus",
        tmp_path,
        config_text,
        f"--storage.tsdb.path={tmp_path / 'tsdb'}",
    )


def start_alertmanager(tmp_path: Path, config_text: str) -> tuple[subprocess.Popen[bytes], str]:
    """The process and its URL, once ready, clustering off; its log is tmp_path/alertmanager.log."""
    return _start(
        ALERTMANAGER,
        "prometheus-alertmanager",
        "alertmanager",
        tmp_path,
        config_text,
        f"--storage.path={tmp_path / 'alertmanager-data'}",
        "--cluster.listen-address=",  # no gossip port: a single, local Alertmanager
    )


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it has not exited within 30 s."""
    proc.send_signal(signal.SIGTERM)  # Prometheus flushes remote_write queues before exiting
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


stop_prometheus = stop_alertmanager = stop
