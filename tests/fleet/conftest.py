"""Real parts for fleet mode: an empty PostgreSQL database per test and an S3 server process.

The S3 server is moto's server mode (`moto[server]`), a separate process that speaks the S3
protocol on loopback; the code under test only talks S3 to it (pyarrow's S3 filesystem through
pyiceberg), exactly as it would to MinIO, Ceph or AWS. One server serves the session (its start
was most of a fleet test's set-up on a busy machine), emptied before each test that asks for it.
"""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator

import pytest
from pyarrow.fs import S3FileSystem
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from fleetscope.settings import Settings, load_settings
from simulator.wire import TEST_TOKEN
from tests.conftest import PG_ADMIN
from warehouse.fleet.gateway import Gateway
from warehouse.fleet.tables import FleetConfig


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(check: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if callable(check) and check():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} not ready after {timeout_s} s")


@pytest.fixture
def pg_url(pg_database: list[str]) -> str:
    """A PostgreSQL database as empty as a new one, with a name of its own: the session's
    (tests/conftest.py), any connection an earlier test left ended (a killed gateway's, a lock
    holder's), renamed, and every schema dropped, `public` made again. Tables, sequences, types
    and advisory locks all go with them."""
    name = f"fs_fleet_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            for attempt in range(20):  # a process the last test left may connect once more
                conn.execute(  # waits up to 10 s for each to be gone, its locks with it
                    text(
                        "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
                        "WHERE datname = :name AND pid <> pg_backend_pid()"
                    ),
                    {"name": pg_database[0]},
                )
                try:
                    conn.execute(text(f"ALTER DATABASE {pg_database[0]} RENAME TO {name}"))
                    break
                except OperationalError:
                    if attempt == 19:
                        raise
                    time.sleep(0.1)
        pg_database[0] = name
    finally:
        admin.dispose()
    url = f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}"
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            schemas = conn.execute(
                text(
                    "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' "
                    "AND nspname <> 'information_schema'"
                )
            ).scalars()
            for schema in list(schemas):
                conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
            conn.execute(text("CREATE SCHEMA public"))
    finally:
        engine.dispose()
    return url


@pytest.fixture
def s3_endpoint(moto_s3_server: str) -> str:
    """The session's moto S3 server (tests/conftest.py), emptied for this test: every bucket and
    object earlier tests made is gone, as with a server of its own."""
    request = urllib.request.Request(f"{moto_s3_server}/moto-api/reset", method="POST")
    with urllib.request.urlopen(request, timeout=60) as answer:
        assert answer.status == 200
    return moto_s3_server


@pytest.fixture
def fleet_settings(tmp_path: object, pg_url: str, s3_endpoint: str) -> Settings:
    return load_settings(env={}).with_overrides(
        core__data_dir=str(tmp_path),
        server__mode="fleet",
        server__port=0,
        server__tokens=TEST_TOKEN,
        server__plugins="",
        warehouse__catalog_url=pg_url,
        warehouse__flush_interval_s=0.05,
        warehouse__log_flush_interval_s=0.1,
        fleet__commit_interval_s=3600.0,  # tests commit with `landed`; a stop commits too
        fleet__warehouse_uri="s3://fleetscope-test/warehouse",
        fleet__s3_endpoint=s3_endpoint,
        fleet__s3_access_key="test",
        fleet__s3_secret_key="test",
    )


@pytest.fixture
def gateway(fleet_settings: Settings) -> Iterator[Gateway]:
    """One in-process fleet gateway on those parts, stopped after the test."""
    gw = Gateway(fleet_settings)
    gw.start()
    try:
        yield gw
    finally:
        gw.stop()


@pytest.fixture
def gateways(fleet_settings: Settings) -> Iterator[list[Gateway]]:
    """Two in-process gateways on the same parts; their committer threads never tick
    (fleet_settings), so tests run the commit passes themselves."""
    running = [Gateway(fleet_settings), Gateway(fleet_settings)]
    for g in running:
        g.start()
    try:
        yield running
    finally:
        for g in running:
            g.stop()


def s3_filesystem(config: FleetConfig) -> S3FileSystem:
    """pyarrow's S3 filesystem on the test's S3 server, to look at objects as they are."""
    return S3FileSystem(
        endpoint_override=config.s3_endpoint.removeprefix("http://"),
        scheme="http",
        access_key="test",
        secret_key="test",
        region="us-east-1",
    )


def landed(*gateways: Gateway) -> None:
    """Every batch the gateways acknowledged, staged and committed now: each one's log flushed
    to staged files, then a commit pass by each (the one holding a table's lock commits it).
    For tests that look at the Iceberg table itself; `reader.scan` sees staged rows already."""
    for gw in gateways:
        gw.writer.flush_log_now()
    for gw in gateways:
        gw.committer.run_once()
