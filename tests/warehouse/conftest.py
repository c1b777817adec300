"""Fixtures for the warehouse tests: real settings in tmp_path, a real server on a free port."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetscope.settings import Settings, load_settings
from simulator.wire import TEST_TOKEN
from warehouse.ingest.runtime import Server

TOKEN = TEST_TOKEN


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(env={}).with_overrides(
        core__data_dir=str(tmp_path / "data"),
        server__port=0,
        server__tokens=TOKEN,
        warehouse__flush_interval_s=0.02,
        warehouse__maintenance_interval_s=3600.0,
        server__plugins="",  # the warehouse alone: analyzer plug-ins are tested in tests/analyzers
    )


@pytest.fixture
def server(settings: Settings) -> Iterator[Server]:
    running = Server(settings)
    running.start()
    try:
        yield running
    finally:
        running.stop()
