"""Fixtures for analyzer tests (fleets from simulator.maker.series, runs in rule_runs)."""

from __future__ import annotations

import pytest

from simulator.maker.series import Fleet


@pytest.fixture
def fleet() -> Fleet:
    return Fleet()
