"""The shipped dashboards and alert rules against what a real Prometheus stores, not fixtures.

A real fleetscope server (TLS, token, the findings exporter plug-in) holds two jobs' samples and
five findings (tests/analyzers/test_prometheus_export.py: job-a in the top 1, job-b pooled as
`other`, one open critical R17 finding for team ml). A real Prometheus scrapes it with the shipped
scrape job and evaluates the shipped rules every second, and sends its alerts to a real
Alertmanager (0.25, Debian `prometheus-alertmanager`) whose only receiver is a webhook on loopback.

Specification:
- every Grafana dashboard variable lists what Prometheus really stored: the job picker lists the
  fleetscope job ids (job-a, other), never the scrape job's name;
- every panel query of both dashboards returns at least one series;
- Alertmanager delivers FleetscopeCriticalFinding for rule R17, team ml to the webhook, in its
  webhook format (version 4), with the labels Prometheus added (the scrape job is not among them:
  the alert sums by rule and team).
"""

from __future__ import annotations

import json
import re
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.analyzers.test_prometheus_export import populate, settings_for
from tests.deploy.test_grafana_dashboards import DASHBOARDS, exprs, load
from tests.deploy.test_prometheus_alert import TLS, shipped_prometheus
from tests.prometheus_process import start_alertmanager, stop_alertmanager
from tests.webhook_receiver import WebhookReceiver
from warehouse.ingest.runtime import Server

pytestmark = [
    pytest.mark.slow,
    pytest.mark.real_component("prometheus"),
    pytest.mark.real_component("alertmanager"),
]

RATE_INTERVAL = "15s"  # Grafana's $__rate_interval for a 1 s scrape: several samples per window


@dataclass
class Stack:
    prometheus: str
    receiver: WebhookReceiver


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("stack")
    receiver = WebhookReceiver()
    am_proc, am_url = start_alertmanager(
        tmp,
        yaml.safe_dump(
            {
                "route": {
                    "receiver": "webhook",
                    "group_by": ["alertname", "rule", "team"],
                    "group_wait": "1s",
                    "group_interval": "1s",
                    "repeat_interval": "1h",
                },
                "receivers": [
                    {
                        "name": "webhook",
                        "webhook_configs": [
                            {"url": f"{receiver.url}/alertmanager", "send_resolved": False}
                        ],
                    }
                ],
            }
        ),
    )
    server = Server(
        settings_for(tmp / "server").with_overrides(
            server__tls_cert_file=str(TLS / "ingest-cert.pem"),
            server__tls_key_file=str(TLS / "ingest-key.pem"),
        )
    )
    server.start()
    try:
        populate(server, ca_file=str(TLS / "ingest-cert.pem"))
        with shipped_prometheus(tmp, [server.url], am_url) as prom:
            yield Stack(prom, receiver)
    finally:
        server.stop()
        stop_alertmanager(am_proc)
        receiver.close()


def api(prom: str, path: str, **params: str | list[str]) -> Any:
    query = urllib.parse.urlencode(params, doseq=True)
    with urllib.request.urlopen(f"{prom}/api/v1/{path}?{query}", timeout=10) as answer:
        body = json.load(answer)
    assert body["status"] == "success", body
    return body["data"]


def poll(what: str, get: Any, timeout_s: float = 90) -> Any:
    """`get()` once truthy (an AssertionError naming `what` after `timeout_s`)."""
    deadline = time.monotonic() + timeout_s
    while not (value := get()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: nothing after {timeout_s} s")
        time.sleep(0.2)
    return value


def substituted(expr: str, values: dict[str, str]) -> str:
    expr = expr.replace("$__rate_interval", RATE_INTERVAL)
    for name, value in sorted(values.items(), key=lambda kv: -len(kv[0])):  # $job_id before $job
        expr = expr.replace(f"${name}", value)
    return expr


def variable_values(
    prom: str, model: dict[str, Any], values: dict[str, str]
) -> dict[str, list[str]]:
    """Each query variable's options, as Grafana asks Prometheus for `label_values(sel, label)`
    (the label-values API with a match[] selector), earlier variables substituted."""
    listed: dict[str, list[str]] = {}
    for variable in model["templating"]["list"]:
        if variable["type"] != "query":
            continue
        match = re.fullmatch(r"label_values\((.+), (\w+)\)", variable["definition"])
        assert match, variable["definition"]
        selector, label = substituted(match[1], values), match[2]
        found = poll(
            f"variable {variable['name']}",
            lambda s=selector, lb=label: api(prom, f"label/{lb}/values", **{"match[]": [s]}),
        )
        listed[variable["name"]] = found
        values[variable["name"]] = found[0]  # Grafana's default: the first option
    return listed


def test_dashboard_variables_list_what_prometheus_stored(stack: Stack) -> None:
    fleet, job = (load(path) for path in DASHBOARDS)
    assert variable_values(stack.prometheus, fleet, {}) == {"cluster": ["c1"], "team": ["ml"]}
    assert variable_values(stack.prometheus, job, {}) == {
        "team": ["ml"],
        "job_id": ["job-a", "other"],  # the fleetscope jobs, not "fleetscope-ingest"
    }


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_every_panel_query_returns_series(stack: Stack, path: Path) -> None:
    model = load(path)
    values: dict[str, str] = {}
    variable_values(stack.prometheus, model, values)
    for expr in exprs(model):
        query = substituted(expr, values)
        result = poll(query, lambda q=query: api(stack.prometheus, "query", query=q)["result"])
        assert all(len(r["value"]) == 2 for r in result), query


def test_alertmanager_delivers_the_critical_finding_to_the_webhook(stack: Stack) -> None:
    def critical(bodies: list[Any]) -> bool:
        return any(
            a["labels"]["alertname"] == "FleetscopeCriticalFinding"
            for b in bodies
            for a in b["alerts"]
        )

    bodies = stack.receiver.wait_for(critical, path="/alertmanager")
    body = next(b for b in bodies if b["groupLabels"]["alertname"] == "FleetscopeCriticalFinding")
    assert (body["version"], body["status"], body["receiver"]) == ("4", "firing", "webhook")
    (alert,) = body["alerts"]
    assert alert["status"] == "firing"
    assert alert["labels"] == {
        "alertname": "FleetscopeCriticalFinding",
        "rule": "R17",
        "team": "ml",
        "severity": "critical",
    }
    assert alert["annotations"]["summary"] == (
        "1 open critical fleetscope finding(s) of rule R17 for team ml"
    )
    assert "/graph?g0.expr=" in alert["generatorURL"]  # a link back to the rule's query
