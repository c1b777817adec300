"""Shared fixtures: one small simulated fleet (6 hosts: k8s pairs, a Slurm pair, one MIG host)."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.fleet import FleetSpec
from simulator.sim import FleetSimulator

T0 = 1_767_571_200  # 2026-01-05T00:00:00Z
DATA = Path(__file__).resolve().parents[1] / "data" / "dcgm"


@pytest.fixture(scope="session")
def sim() -> FleetSimulator:
    return FleetSimulator(FleetSpec(hosts=6, seed=63), origin_s=T0, horizon_s=2 * 86_400)
