"""The real thing: `fleetscope dashboard` serving the test warehouse, clicked through in headless
Chromium from the fleet page to the idlest job and on to its trace, with a screenshot of each."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.dashboard.browser import CHROMIUM, tour


@pytest.mark.slow
@pytest.mark.real_component("chromium")
@pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason="chromium is not installed")
def test_fleet_to_job_to_trace_in_chromium(warehouse_dashboard: str, tmp_path: Path) -> None:
    texts = tour(warehouse_dashboard, tmp_path)
    fleet = texts["fleet"]
    for shown in ("8.00 GPU-h", "4.95 GPU-h", "3.70 GPU-h", "3.05 GPU-h", "6 GPUs · 3 jobs"):
        assert shown in fleet
    assert "Job stall-1" in texts["job"]
    assert "45.0 %" in texts["job"]  # mean active of stall-1
    assert "40.0 %" in texts["job"]  # its data wait
    assert "98.3 %" in texts["trace"]  # the idle share analyze_trace gives this trace
    assert "hosts with XID errors" in texts["hosts"]
    for page in ("fleet", "job", "trace", "jobs", "traces", "hosts", "sharing"):
        assert (tmp_path / f"{page}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
