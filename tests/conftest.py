"""Suite-wide rules: real-component skips are named, in CI (CI=true) any skip fails the run and
Hypothesis draws the same examples every run; servers one session shares (S3, a PostgreSQL database)."""

from __future__ import annotations

import gc
import logging
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

from app.supervise import free_port

_skipped: list[str] = []

# Hypothesis: in CI (CI=true) every run draws the same examples (derandomize, no example
# database carried between runs), so a red run is red again when re-run and a green one says the
# same examples passed; locally the draws vary, and failures are replayed from .hypothesis/.
# HYPOTHESIS_PROFILE=ci picks CI's draws here. The long runs are `make fuzz`.
hypothesis_settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
hypothesis_settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") == "true" else "default")
)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _skipped.append(f"{report.nodeid}: {reason}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _skipped and os.environ.get("CI") == "true":
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _skipped:
        return
    terminalreporter.section("skipped real-component tests")
    for line in _skipped:
        terminalreporter.write_line(line)
    if os.environ.get("CI") == "true":
        terminalreporter.write_line("CI=true: no test may be skipped in CI; failing the run.")


def pytest_unconfigure(config: pytest.Config) -> None:
    """Free cached DuckDB connections before the interpreter tears down, not during it.

    Streamlit's resource cache (AppTest runs in-process) holds reader connections; released at
    interpreter exit, DuckDB's bindings print a leak report after pytest's closing line.
    """
    streamlit = sys.modules.get("streamlit")
    if streamlit is not None:
        for name in list(logging.root.manager.loggerDict):
            if name.startswith("streamlit"):  # outside a runtime it logs a notice per clear
                logging.getLogger(name).setLevel(logging.ERROR)
        streamlit.cache_resource.clear()
        streamlit.cache_data.clear()
    gc.collect()


@pytest.fixture
def test_server_plugins(tmp_path: Path) -> Iterator[None]:
    """tests/fleet's server plug-ins installed (entry points, as `server.plugins` requires)."""
    from fleetscope.plugins import SERVER
    from tests.plugin_dist import TEST_SERVER_PLUGINS, installed

    with installed(tmp_path / "test-plugins", {SERVER: TEST_SERVER_PLUGINS}):
        yield


@pytest.fixture(scope="session")
def moto_s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto's S3 server (`moto[server]`, started by tests/s3_server.py) on a free loopback port,
    one for the session: fleet tests take it through tests/fleet/conftest.py's `s3_endpoint`,
    which empties it first. Its stderr goes to a file, whose end a failed start shows."""
    port = free_port()
    log = tmp_path_factory.mktemp("moto") / "stderr.log"
    with log.open("wb") as stderr:
        proc = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).with_name("s3_server.py")),
                "-H",
                "127.0.0.1",
                "-p",
                str(port),
            ],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120  # its imports on a busy 2-core machine
    try:
        while True:
            try:
                urllib.request.urlopen(endpoint, timeout=2).close()
                break
            except urllib.error.HTTPError:
                break  # any HTTP answer: it is serving
            except OSError:
                if proc.poll() is not None:
                    tail = log.read_text(errors="replace")[-2000:]
                    message = f"moto's S3 server exited with {proc.returncode}:\n{tail}"
                    raise AssertionError(message) from None
                assert time.monotonic() < deadline, "moto's S3 server did not answer in 120 s"
                time.sleep(0.05)
        yield endpoint
    finally:
        proc.kill()
        proc.wait()


PG_ADMIN = "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres"


@pytest.fixture(scope="session")
def pg_database() -> Iterator[list[str]]:
    """One throwaway PostgreSQL database (127.0.0.1:5432) for the session, dropped at its end:
    CREATE and DROP DATABASE cost 0.6-2.5 s a test at load 20-26 (each copies or deletes a
    database's files), a rename and a schema reset 0.1 s. Fleet tests take it through
    tests/fleet/conftest.py's `pg_url`, which empties it and renames it for each test (the list
    holds its current name: code under test caches engines and catalogs by URL, so each test
    needs a URL of its own). Its names are unique: other runs share the server."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import OperationalError

    name = [f"fs_fleet_{uuid.uuid4().hex[:12]}"]
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f"CREATE DATABASE {name[0]}"))
    except OperationalError as exc:
        admin.dispose()
        pytest.skip(f"PostgreSQL at 127.0.0.1:5432 is not reachable: {exc.orig}")
    try:
        yield name
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {name[0]} WITH (FORCE)"))
        admin.dispose()
