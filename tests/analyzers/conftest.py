"""Fixtures for analyzer tests (helpers live in fleet_builder)."""

from __future__ import annotations

import pytest

from tests.analyzers.fleet_builder import Fleet


@pytest.fixture
def fleet() -> Fleet:
    return Fleet()
