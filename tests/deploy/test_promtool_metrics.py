"""`promtool check metrics` finds nothing to flag on a live scrape of the agent and of the server.

promtool's linter (Prometheus 2.42, Debian `prometheus`) flags what Prometheus's naming guide
forbids: counters without `_total`, non-base units (hours, milliseconds, percent), camelCase,
missing HELP, reserved label names. The agent under test scrapes a real dcgm-exporter page over
HTTP and ships it to a real server over HTTP; the server runs the findings exporter plug-in with a
committed batch and findings in its catalog, so every family carries samples when scraped.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from collector.agent import build_agent
from collector.metrics import MetricsServer, freshness_check
from fleetscope import __version__
from fleetscope.settings import load_settings
from simulator.wire import TEST_TOKEN
from tests.analyzers.test_prometheus_export import populate, settings_for
from tests.collector.conftest import Exporter, dcgm_text
from warehouse.ingest.runtime import Server

pytestmark = [pytest.mark.slow, pytest.mark.real_component("promtool")]


def promtool_check(text: str) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian package `prometheus`)")
    return subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )


def get(url: str, token: str | None = None) -> str:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=30) as answer:
        return str(answer.read().decode())


def types(text: str) -> dict[str, str]:
    return {f.name: f.type for f in text_string_to_metric_families(text)}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = Server(settings_for(tmp_path / "server"))
    running.start()
    try:
        yield running
    finally:
        running.stop()


def test_a_live_agent_scrape_passes_promtool(tmp_path: Path, server: Server) -> None:
    exporter = Exporter(dcgm_text("h100_slurm_main"))
    settings = load_settings(env={}).with_overrides(
        agent__dcgm_url=exporter.url,
        agent__ingest_url=server.url,
        agent__token=TEST_TOKEN,
        agent__spool_dir=str(tmp_path / "spool"),
        agent__slurm_job_dir="",
    )
    agent = build_agent(settings)
    metrics_server = MetricsServer(
        agent.metrics, freshness_check(lambda: agent.last_ok_scrape, 60.0), 0, host="127.0.0.1"
    )
    metrics_server.start()
    try:
        agent.tick()
        agent.batcher.flush()
        assert agent.shipper.drain()  # shipped: the server answered 202
        text = get(f"http://127.0.0.1:{metrics_server.port}/metrics")
    finally:
        metrics_server.close()
        for close in agent.closers:
            close()
        exporter.close()
    result = promtool_check(text)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    found = types(text)
    assert found["fleetscope_agent_batches_dropped"] == "counter"  # `_total` in the text
    assert "fleetscope_agent_batches_dropped_total 0.0" in text
    assert found["process_cpu_seconds"] == "counter"
    assert "process_resident_memory_bytes" in found
    assert 'fleetscope_build_info{component="agent",python_version=' in text
    assert f'version="{__version__}"}} 1.0' in text
    assert 'fleetscope_agent_samples_shipped_total{table="gpu_samples"} 8.0' in text


def test_a_live_server_scrape_passes_promtool(server: Server) -> None:
    populate(server)
    deadline = time.monotonic() + 60
    while True:  # until the findings exporter has refreshed after the commit and the findings
        text = get(f"{server.url}/metrics", TEST_TOKEN)
        if (
            "fleetscope_findings_open{" in text
            and "fleetscope_allocated_gpu_seconds_total{" in text
        ):
            break
        assert time.monotonic() < deadline, text
        time.sleep(0.1)
    result = promtool_check(text)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    found = types(text)
    assert found["fleetscope_recoverable_gpu_seconds"] == "gauge"
    assert found["fleetscope_allocated_gpu_seconds"] == "counter"
    assert 'fleetscope_build_info{component="server",' in text
    assert "process_start_time_seconds" in found
    families = list(text_string_to_metric_families(text))
    labels = {k for f in families for s in f.samples for k in s.labels}
    assert "job" not in labels  # Prometheus would rename it exported_job
    assert "job_id" in labels
