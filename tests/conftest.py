"""Suite-wide rules: real-component skips are named, and in CI (CI=true) any skip fails the run."""

from __future__ import annotations

import gc
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_skipped: list[str] = []


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
