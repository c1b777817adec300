"""A real Prometheus scrapes a real fleetscope server's /metrics over TLS with the bearer token, by
the shipped scrape job (deploy/prometheus/fleetscope-scrape.yml: only the target, the CA file and
the token file are this test's), and evaluates the shipped rule file
(deploy/prometheus/fleetscope-alerts.yml, unchanged) until FleetscopeCriticalFinding fires for the
one open critical finding, with the finding's rule and team as labels."""

from __future__ import annotations

import contextlib
import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.analyzers.test_prometheus_export import TEST_TOKEN, populate, settings_for
from tests.prometheus_process import start_prometheus, stop_prometheus
from warehouse.ingest.runtime import Server

pytestmark = [pytest.mark.slow, pytest.mark.real_component("prometheus")]

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
RULES = DEPLOY / "fleetscope-alerts.yml"
SCRAPE = DEPLOY / "fleetscope-scrape.yml"
TLS = Path(__file__).resolve().parents[1] / "data" / "tls"  # self-signed for 127.0.0.1


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = Server(
        settings_for(tmp_path / "server").with_overrides(
            server__tls_cert_file=str(TLS / "ingest-cert.pem"),
            server__tls_key_file=str(TLS / "ingest-key.pem"),
        )
    )
    running.start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def prometheus(tmp_path: Path, server: Server) -> Iterator[str]:
    with shipped_prometheus(tmp_path, [server.url]) as url:
        yield url


@contextlib.contextmanager
def shipped_prometheus(
    tmp_path: Path, server_urls: list[str], alertmanager_url: str | None = None
) -> Iterator[str]:
    """A real Prometheus with the shipped scrape job on `server_urls` (https, the test CA, the test
    token) and the shipped rules, scraping and evaluating every second, sending its alerts to
    `alertmanager_url` when given; its URL."""
    token_file = tmp_path / "fleetscope-token"  # server.read_auth is on: /metrics needs the token
    token_file.write_text(TEST_TOKEN)
    (job,) = yaml.safe_load(SCRAPE.read_text())["scrape_configs"]
    assert job["job_name"] == "fleetscope-ingest" and job["scheme"] == "https"
    job["static_configs"] = [{"targets": [url.removeprefix("https://") for url in server_urls]}]
    job["tls_config"]["ca_file"] = str(TLS / "ingest-cert.pem")
    job["authorization"]["credentials_file"] = str(token_file)
    config: dict[str, Any] = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [job],
    }
    if alertmanager_url is not None:
        target = alertmanager_url.removeprefix("http://")
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [target]}]}]}
    proc, url = start_prometheus(tmp_path, json.dumps(config))  # YAML is a superset of JSON
    try:
        yield url
    finally:
        stop_prometheus(proc)


def alerts(prom_url: str) -> list[dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"{prom_url}/api/v1/alerts", timeout=5) as answer:
            found: list[dict[str, Any]] = json.load(answer)["data"]["alerts"]
            return found
    except OSError:  # not listening yet
        return []


def firing(prom_url: str, alertname: str, timeout_s: float = 90) -> list[dict[str, Any]]:
    """The firing alerts named `alertname`, once there is one (none after `timeout_s`)."""
    deadline = time.monotonic() + timeout_s
    found: list[dict[str, Any]] = []
    while not found and time.monotonic() < deadline:
        found = [
            a
            for a in alerts(prom_url)
            if a["labels"]["alertname"] == alertname and a["state"] == "firing"
        ]
        time.sleep(0.2)
    return found


def test_critical_finding_alert_fires_in_real_prometheus(server: Server, prometheus: str) -> None:
    populate(
        server, ca_file=str(TLS / "ingest-cert.pem")
    )  # one open critical finding: R17 for team ml
    fired = firing(prometheus, "FleetscopeCriticalFinding")
    assert [a["labels"] for a in fired] == [
        {
            "alertname": "FleetscopeCriticalFinding",
            "rule": "R17",
            "team": "ml",
            "severity": "critical",
        }
    ]
    assert fired[0]["value"] == "1e+00"
    assert fired[0]["annotations"]["summary"] == (
        "1 open critical fleetscope finding(s) of rule R17 for team ml"
    )
