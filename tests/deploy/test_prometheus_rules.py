"""deploy/prometheus: the alerting rules load in Prometheus (`promtool check rules`) and each alert
fires on exactly the series it is written for (`promtool test rules`, the unit tests next to it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"

pytestmark = pytest.mark.real_component("promtool")


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is not installed (Debian package `prometheus`)")
    return found


def test_promtool_accepts_the_rules() -> None:
    result = subprocess.run(
        [promtool(), "check", "rules", "fleetscope-alerts.yml"],
        cwd=RULES, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 7 rules found" in result.stdout


def test_every_alert_fires_on_its_series() -> None:
    result = subprocess.run(
        [promtool(), "test", "rules", "fleetscope-alerts.test.yml"],
        cwd=RULES, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
