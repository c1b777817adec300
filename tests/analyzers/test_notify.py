"""Notifications (analyzers.notify) delivered over real HTTP to a receiver on loopback.

Catalog: a real SQLite catalog with findings as the analyzers store them. Receiver: a real HTTP
server (tests/webhook_receiver.py) with one path per channel.

Specification:
- a new open critical finding is POSTed once to the webhook, as Alertmanager's webhook JSON
  (version 4, alertname FleetscopeCriticalFinding, labels rule/team/job_id/cluster/host), and once
  to the Slack-style webhook as {"text": ...}; a second round sends nothing;
- a warn finding is not sent; when it escalates to critical (same id) it is sent once, labelled
  escalated; acknowledged and suppressed findings and findings older than notify.lookback_s never;
- a failed delivery (500) is retried next round, and then sent exactly once;
- two notifiers on one catalog (two fleet gateways) send each finding once between them;
- the server plug-in does the same on a running server, from the notify.* settings.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from analyzers.notify import Notifier, from_settings
from analyzers.notify.payloads import summary
from analyzers.run.results import from_catalog
from fleetscope.errors import ConfigError
from fleetscope.settings import load_settings
from simulator.wire import TEST_TOKEN
from tests.webhook_receiver import WebhookReceiver
from warehouse import catalog
from warehouse.catalog import findings as cat
from warehouse.catalog import fleet
from warehouse.ingest.runtime import Server

NOW = datetime.now(UTC)


def finding(fid: str, severity: str, *, rule: str = "R17", age_h: float = 1.0) -> cat.Finding:
    end = NOW - timedelta(hours=age_h)
    return cat.Finding(
        finding_id=fid, rule_id=rule, severity=severity, window_start=end - timedelta(hours=1),
        window_end=end, wasted_gpu_hours=2.5, job_id="train-a", team="ml", host="h1",
        gpus=["0"], evidence={"xid": 79}, recommendation="Drain h1 and reset GPU 0.",
    )  # fmt: skip


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = catalog.connect(f"sqlite:///{tmp_path / 'catalog.sqlite'}")
    with engine.begin() as conn:
        fleet.upsert_jobs(conn, [fleet.Job("train-a", cluster="c1", team="ml")])
    yield engine
    engine.dispose()


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    running = WebhookReceiver()
    yield running
    running.close()


def store(engine: Engine, *found: cat.Finding) -> None:
    with engine.begin() as conn:
        cat.upsert_findings(conn, list(found), run_id=None)


def notifier(engine: Engine, receiver: WebhookReceiver, **extra: Any) -> Notifier:
    urls = {"webhook": f"{receiver.url}/am", "slack": f"{receiver.url}/slack"}
    return Notifier(engine, urls, dashboard_url="http://dash.example", **extra)


def test_a_new_critical_finding_is_sent_once_per_channel(
    engine: Engine, receiver: WebhookReceiver
) -> None:
    store(engine, finding("f1", "critical"), finding("f2", "warn", rule="R1"))
    sender = notifier(engine, receiver)
    assert sender.round() == 2
    assert sender.round() == 0  # at most once
    (am,) = receiver.bodies("/am")
    assert (am["version"], am["status"], am["receiver"]) == ("4", "firing", "fleetscope")
    (alert,) = am["alerts"]
    assert alert["labels"] == {
        "alertname": "FleetscopeCriticalFinding", "severity": "critical", "rule": "R17",
        "team": "ml", "job_id": "train-a", "cluster": "c1", "host": "h1", "finding_id": "f1",
        "notification": "new",
    }  # fmt: skip
    assert alert["annotations"] == {
        "summary": "new critical finding R17: R17 (job train-a, team ml, host h1); "
        "2.5 GPU-hours recoverable",
        "description": "Drain h1 and reset GPU 0.",
    }
    assert alert["startsAt"] == finding("f1", "critical").window_end.isoformat().replace(
        "+00:00", "Z"
    )
    assert (alert["endsAt"], alert["generatorURL"]) == (
        "0001-01-01T00:00:00Z",
        "http://dash.example",
    )
    (slack,) = receiver.bodies("/slack")
    assert slack == {
        "text": "*fleetscope: new critical finding R17: R17 (job train-a, team ml, host h1); "
        "2.5 GPU-hours recoverable*\nDrain h1 and reset GPU 0.\n"
        "cluster c1, finding `f1` <http://dash.example|open the dashboard>"
    }


def test_an_escalated_finding_is_sent_once_as_escalated(
    engine: Engine, receiver: WebhookReceiver
) -> None:
    store(engine, finding("f2", "warn", rule="R16"))
    sender = notifier(engine, receiver)
    assert sender.round() == 0
    store(engine, finding("f2", "critical", rule="R16"))  # the analyzer re-ran: now critical
    assert sender.round() == 2
    assert sender.round() == 0
    (am,) = receiver.bodies("/am")
    assert am["alerts"][0]["labels"]["notification"] == "escalated"
    assert receiver.bodies("/slack")[0]["text"].startswith("*fleetscope: escalated critical")


def test_acknowledged_suppressed_and_old_findings_are_not_sent(
    engine: Engine, receiver: WebhookReceiver
) -> None:
    store(
        engine,
        finding("acked", "critical"),
        finding("quiet", "critical", rule="R5"),
        finding("old", "critical", age_h=30),  # outside the 24 h lookback
    )
    with engine.begin() as conn:
        cat.set_finding_state(conn, "acked", "acknowledged")
        cat.add_suppression(conn, "team", "ml", rule_id="R5")
    assert notifier(engine, receiver).round() == 0
    assert receiver.received == []


def test_a_failed_delivery_is_retried_next_round(engine: Engine, receiver: WebhookReceiver) -> None:
    store(engine, finding("f1", "critical"))
    sender = Notifier(engine, {"webhook": f"{receiver.url}/am"})
    receiver.status = 500
    assert sender.round() == 0
    assert len(receiver.bodies("/am")) == 1  # tried, refused
    receiver.status = 200
    assert sender.round() == 1
    assert sender.round() == 0
    assert len(receiver.bodies("/am")) == 2


def test_two_notifiers_on_one_catalog_send_once(engine: Engine, receiver: WebhookReceiver) -> None:
    store(engine, finding("f1", "critical"))
    first, second = notifier(engine, receiver), notifier(engine, receiver)
    assert first.round() + second.round() == 2
    assert len(receiver.received) == 2


def test_settings_pick_the_channels(tmp_path: Path, engine: Engine) -> None:
    settings = load_settings(env={})
    assert from_settings(engine, settings) is None  # no URL: off
    on = from_settings(engine, settings.with_overrides(notify__slack_webhook_url="http://x/y"))
    assert on is not None and on.urls == {"slack": "http://x/y"}
    with pytest.raises(ConfigError, match=r"notify\.min_severity must be one of info, warn"):
        from_settings(
            engine,
            settings.with_overrides(notify__webhook_url="http://x", notify__min_severity="high"),
        )


@pytest.mark.slow
def test_the_server_plugin_notifies_from_a_running_server(
    tmp_path: Path, receiver: WebhookReceiver
) -> None:
    settings = load_settings(env={}).with_overrides(
        core__data_dir=str(tmp_path),
        server__port=0,
        server__tokens=TEST_TOKEN,
        server__plugins="analyzers.notify",
        notify__webhook_url=f"{receiver.url}/am",
        notify__interval_s=0.1,
    )
    server = Server(settings)
    server.start()
    try:
        store(server.catalog, finding("f1", "critical"))
        (body,) = receiver.wait_for(lambda bodies: len(bodies) >= 1, path="/am", timeout_s=60)
    finally:
        server.stop()
    assert body["alerts"][0]["labels"]["finding_id"] == "f1"
    assert json.dumps(body)  # plain JSON
    assert len(receiver.bodies("/am")) == 1


def test_a_finding_nobody_priced_is_sent_as_not_estimated() -> None:
    fragmented = replace(
        finding("f9", "warn", rule="R15"),
        wasted_gpu_hours=0.0,
        estimate_method="not estimated: the cost is communication time samples cannot isolate",
    )
    assert summary(from_catalog(fragmented).finding, "new").endswith(
        "(job train-a, team ml, host h1); recoverable GPU-hours not estimated"
    )
