"""`fleetscope demo` as a person runs it: live numbers in the browser, then Ctrl-C leaves nothing.

The demo's real processes (simulator, agents, server, Streamlit) run on free loopback ports; headless
Chromium loads the fleet page and must show the GPU and job counts the warehouse holds at that
moment. SIGINT then stops the demo, and no process that carries the demo's data folder in its
environment may survive it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.supervise import free_port
from fleetscope.settings import load_settings
from tests.dashboard.browser import Browser
from warehouse import reader

pytestmark = [pytest.mark.slow, pytest.mark.real_component("chromium")]


def processes_mentioning(marker: str) -> list[int]:
    """PIDs whose environment names `marker` (the demo gives every child its data folder)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def warehouse_counts(data_dir: Path) -> str:
    settings = load_settings(env={"FLEETSCOPE_CORE_DATA_DIR": str(data_dir)})
    connection = reader.connect(settings)
    gpus, jobs = connection.execute(
        "SELECT count(DISTINCT (host, gpu_index)), count(DISTINCT job_id) FROM gpu_samples"
    ).fetchall()[0]
    connection.close()
    return f"{gpus} GPUs · {jobs} jobs"


def test_demo_shows_live_warehouse_numbers_and_stops_cleanly(tmp_path: Path) -> None:
    demo_dir = tmp_path / "demo"
    env = {
        **os.environ,
        "FLEETSCOPE_SERVER_PORT": str(free_port()),
        "FLEETSCOPE_DASHBOARD_PORT": str(free_port()),
        "FLEETSCOPE_SIMULATOR_BASE_PORT": str(free_port()),
    }
    demo = subprocess.Popen(
        [str(Path(sys.executable).with_name("fleetscope")), "demo", "--hosts", "2",
         "--interval-s", "1", "--dir", str(demo_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    assert demo.stdout is not None
    try:
        url = None
        for line in demo.stdout:
            if "dashboard at" in line:
                url = line.split("dashboard at ")[1].split()[0]
                break
        assert url, "the demo never printed its dashboard URL"
        browser = Browser()
        try:
            deadline = time.monotonic() + 60
            while True:
                browser.navigate(url)
                text = browser.wait_for_text("GPU-h", timeout_s=60)
                expected = warehouse_counts(demo_dir / "data")
                if expected in text or time.monotonic() > deadline:
                    break
                time.sleep(2)  # a job started between the page's query and ours: look again
            browser.screenshot(tmp_path / "demo.png")
        finally:
            browser.close()
        assert expected in text
        assert "Allocated" in text and "Idlest jobs" in text
    finally:
        demo.send_signal(signal.SIGINT)
        output = demo.communicate(timeout=60)[0]
    assert demo.returncode == 0, output
    assert "no process left running" in output
    assert processes_mentioning(str(demo_dir)) == []
