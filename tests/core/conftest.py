"""Fixtures for the core's tests: the shared dcgm-exporter pages under tests/data/dcgm."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.collector.conftest import dcgm_text


@pytest.fixture
def page() -> Callable[[str], str]:
    return dcgm_text
