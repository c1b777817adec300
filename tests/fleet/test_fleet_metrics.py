"""The findings and GPU-hours families in fleet mode (real PostgreSQL, a real S3 server, gateways and
an embedded server over HTTP): with two gateways running `analyzers.prometheus_export`, exactly
one `/metrics` (the leader's) carries the families, with the values an embedded server gives on the
same samples and findings; the other serves its own ingest families only. When the leader stops,
the other gateway takes the lead and serves the same values, its counters started from its own
first refresh. A real Prometheus scraping both gateways with the shipped scrape job and rules
fires the critical-finding alert with the finding counted once."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetscope.settings import Settings
from tests.analyzers.test_prometheus_export import (
    land_findings,
    land_samples,
    scrape,
    series,
    settings_for,
)
from tests.deploy.test_prometheus_alert import TLS, firing, shipped_prometheus
from tests.fleet.conftest import wait_until
from tests.fleet.test_fleet_trace_hooks import two_gateways
from warehouse.fleet.gateway import Gateway
from warehouse.ingest.runtime import Server

pytestmark = pytest.mark.slow

FAMILIES = (  # every family of the exporter, as scraped (counters with their _total)
    "fleetscope_recoverable_gpu_seconds",
    "fleetscope_findings_open",
    "fleetscope_job_gpu_efficiency_ratio",
    "fleetscope_allocated_gpu_seconds_total",
    "fleetscope_active_gpu_seconds_total",
    "fleetscope_sm_active_gpu_seconds_total",
    "fleetscope_fleet_metrics_refreshed_timestamp_seconds",
    "fleetscope_fleet_metrics_refresh_failures_total",
)
VALUES = FAMILIES[:6] + FAMILIES[7:]  # all but the refresh's timestamp
REFRESH_S = 0.1

Scraped = dict[str, dict[str, float]]


def exported(url: str) -> Scraped:
    """The exporter's families on `url`'s /metrics (absent ones left out)."""
    metrics = scrape(url)
    return {name: series(metrics, name) for name in FAMILIES if name in metrics}


def settled(url: str) -> Scraped | None:
    """The families once a refresh has seen the samples and the findings, else None."""
    families = exported(url)
    counted = families.get("fleetscope_allocated_gpu_seconds_total")
    return families if counted and families.get("fleetscope_findings_open") else None


def wait_settled(url: str, what: str, timeout_s: float = 90) -> Scraped:
    deadline = time.monotonic() + timeout_s
    while (families := settled(url)) is None:
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not settled after {timeout_s} s: {exported(url)}")
        time.sleep(0.05)
    return families


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[Scraped]:
    """What an embedded server exports for the same samples and findings."""
    server = Server(settings_for(tmp_path / "embedded"))
    server.start()
    try:
        land_samples(server.url)
        land_findings(server.catalog)
        yield wait_settled(server.url, "the embedded server's families")
    finally:
        server.stop()


def exporting(fleet_settings: Settings) -> Settings:
    """Gateways with the exporter, set as the embedded server of tests/analyzers is."""
    return fleet_settings.with_overrides(
        server__plugins="analyzers.prometheus_export",
        analyzers__metrics_top_jobs=1,
        analyzers__metrics_refresh_s=REFRESH_S,
        analyzers__lateness_s=60.0,
    )


@pytest.fixture
def gateways(fleet_settings: Settings, tmp_path: Path) -> Iterator[list[Gateway]]:
    """Two exporting gateways; the list holds the running ones."""
    running = list(two_gateways(exporting(fleet_settings), tmp_path))
    try:
        yield running
    finally:
        for gw in running:
            gw.stop()


def test_one_gateway_exports_the_embedded_values_and_another_takes_over_when_it_stops(
    embedded: Scraped, gateways: list[Gateway]
) -> None:
    a, b = gateways
    land_samples(b.url)
    land_findings(a.catalog)
    wait_until(lambda: any(settled(gw.url) for gw in gateways), 90, "a gateway's families")
    (leader,) = [gw for gw in gateways if exported(gw.url)]  # exactly one exports
    follower = b if leader is a else a
    scraped = wait_settled(leader.url, "the leader's families")

    assert {name: scraped[name] for name in VALUES} == {name: embedded[name] for name in VALUES}
    assert scraped["fleetscope_allocated_gpu_seconds_total"] == {"c1": 1800.0}  # tests/analyzers
    (refreshed,) = scraped["fleetscope_fleet_metrics_refreshed_timestamp_seconds"].values()
    assert time.time() - 60 <= refreshed <= time.time()
    follows = scrape(follower.url)
    assert not set(follows) & set(FAMILIES)  # none of them, not even at zero
    assert series(follows, "fleetscope_ingest_requests_total")  # its own families stay

    gateways.remove(leader)
    leader.stop()  # its lock is released: the follower leads from its next refresh
    took_over = wait_settled(follower.url, "the other gateway's families")
    assert {name: took_over[name] for name in VALUES} == {name: embedded[name] for name in VALUES}


def instant(prom_url: str, expr: str) -> list[float]:
    """The values of an instant query's vector."""
    url = f"{prom_url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as answer:
        return [float(v["value"][1]) for v in json.load(answer)["data"]["result"]]


@pytest.mark.real_component("prometheus")
def test_prometheus_scraping_every_gateway_fires_the_critical_finding_counted_once(
    fleet_settings: Settings, tmp_path: Path
) -> None:
    settings = exporting(fleet_settings).with_overrides(
        server__tls_cert_file=str(TLS / "ingest-cert.pem"),
        server__tls_key_file=str(TLS / "ingest-key.pem"),
    )
    a, b = two_gateways(settings, tmp_path)
    try:
        land_findings(a.catalog)  # one open critical finding: R17 for team ml
        (tmp_path / "prometheus").mkdir()
        with shipped_prometheus(tmp_path / "prometheus", [a.url, b.url]) as prom:
            (fired,) = firing(prom, "FleetscopeCriticalFinding")
            assert fired["labels"] == {
                "alertname": "FleetscopeCriticalFinding",
                "rule": "R17",
                "team": "ml",
                "severity": "critical",
            }
            assert fired["value"] == "1e+00"  # one exporter: not once per gateway
            up = 'count(up{job="fleetscope-ingest"} == 1)'
            wait_until(lambda: instant(prom, up) == [2.0], 30, "both gateways scraped")
            assert instant(prom, "count(fleetscope_fleet_metrics_refreshed_timestamp_seconds)") == [
                1.0
            ]
    finally:
        a.stop()
        b.stop()
