"""A fleet gateway that cannot reach its catalog or object store says which setting, in one line.

Real processes: `fleetscope server --mode fleet` against a PostgreSQL port nothing listens on, a
login PostgreSQL refuses, and an S3 endpoint nothing serves. Before issue 28 each printed a
128-line traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.fuzz import free_port
from simulator.wire import TEST_TOKEN


def start_gateway(tmp_path: Path, catalog_url: str, s3_endpoint: str) -> tuple[int, list[str]]:
    env = {
        **os.environ,
        "FLEETSCOPE_CORE_DATA_DIR": str(tmp_path / "data"),
        "FLEETSCOPE_SERVER_TOKENS": TEST_TOKEN,
        "FLEETSCOPE_SERVER_PLUGINS": "",
        "FLEETSCOPE_WAREHOUSE_CATALOG_URL": catalog_url,
        "FLEETSCOPE_FLEET_WAREHOUSE_URI": "s3://fleetscope-test/warehouse",
        "FLEETSCOPE_FLEET_S3_ENDPOINT": s3_endpoint,
        "FLEETSCOPE_FLEET_S3_ACCESS_KEY": "test",
        "FLEETSCOPE_FLEET_S3_SECRET_KEY": "test",
    }
    argv = [sys.executable, "-m", "app.cli", "server", "--mode", "fleet", "--port", "0"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    return done.returncode, [line for line in done.stderr.splitlines() if line.strip()]


@pytest.mark.parametrize(
    ("catalog_url", "named"),
    [
        ("postgresql+psycopg2://postgres@127.0.0.1:{port}/fleetscope", "127.0.0.1:{port}"),
        (
            "postgresql+psycopg2://no_such_role:secret@127.0.0.1:5432/fleetscope",
            "no_such_role:***@127.0.0.1:5432",
        ),
    ],
    ids=["wrong port", "wrong login"],
)
def test_an_unreachable_catalog_is_one_line_naming_the_setting(
    tmp_path: Path, s3_endpoint: str, catalog_url: str, named: str
) -> None:
    port = free_port()
    code, lines = start_gateway(tmp_path, catalog_url.format(port=port), s3_endpoint)
    assert code == 7
    assert len(lines) == 1, lines
    assert lines[0].startswith("fleetscope: error: fleet gateway cannot reach postgresql")
    assert named.format(port=port) in lines[0] and "(warehouse.catalog_url)" in lines[0]
    assert "secret" not in lines[0]


def test_an_unreachable_object_store_is_one_line_naming_the_setting(
    tmp_path: Path, pg_url: str
) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    code, lines = start_gateway(tmp_path, pg_url, endpoint)
    assert code == 7
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"fleetscope: error: fleet gateway cannot reach {endpoint}")
    assert "(fleet.s3_endpoint)" in lines[0]
