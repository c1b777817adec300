"""Notifications: new and escalated findings pushed to a webhook and a Slack-style channel.

A server plug-in (`analyzers.notify` in `server.plugins`, on by default, both modes), idle until
`notify.webhook_url` or `notify.slack_webhook_url` is set. Every `notify.interval_s` a thread of
its own reads the open findings whose window ended in the last `notify.lookback_s` (the read
API's view: suppressed and acknowledged ones left out) and sends each one of at least
`notify.min_severity` that no process has sent on that channel at that severity yet:
- "new": never notified; "escalated": seen before at a lower severity (the same finding id, so
  the same rule, job, GPUs and window), now at or above the threshold;
- at most once per finding, channel and severity: a catalog claim (warehouse.catalog.notifications)
  is taken before sending, so fleet gateways polling the same catalog never send twice; a failed
  delivery (no answer, or not 2xx) releases its claim and the next round sends it again.
Payloads: analyzers.notify.payloads. Must never change a finding.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine

from analyzers.findings import Severity
from analyzers.notify import payloads
from analyzers.read_api.params import Window
from analyzers.read_api.views import Filters, Row, rows
from fleetscope.errors import ConfigError
from warehouse.catalog import notifications

log = logging.getLogger(__name__)

PLUGIN_ORDER = 44  # fleetscope.plugins: after the read API whose view it reads
SERVER_MODES = ("embedded", "fleet")
SEEN = "seen"  # the pseudo-channel recording severities below the threshold, to tell escalations

Payload = Callable[[Any, str, str | None, str, str], dict[str, Any]]
# Channel name -> (the setting holding its URL, its payload). A new channel is one line here.
CHANNELS: dict[str, tuple[str, Payload]] = {
    "webhook": ("webhook_url", payloads.alertmanager),
    "slack": ("slack_webhook_url", payloads.slack),
}


def post_json(url: str, body: dict[str, Any], timeout_s: float) -> None:
    """POST `body`; an exception unless the answer is 2xx."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "User-Agent": "fleetscope-notify"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as answer:
        if not 200 <= answer.status < 300:
            raise OSError(f"{url} answered {answer.status}")


@dataclass
class Notifier:
    catalog: Engine
    urls: dict[str, str]  # channel -> URL, only the configured channels
    min_severity: Severity = Severity.CRITICAL
    lookback_s: float = 86400.0
    timeout_s: float = 10.0
    dashboard_url: str = ""
    send: Callable[[str, dict[str, Any], float], None] = post_json
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)

    def round(self) -> int:
        """One pass: send what is due on every channel; the number of notifications sent."""
        now = self.clock()
        window = Window("lookback", now - timedelta(seconds=self.lookback_s), now)
        found = rows(self.catalog, Filters(window=window, state="open"))
        due = [r for r in found if r.stored.finding.severity.rank >= self.min_severity.rank]
        self._record_seen([r for r in found if r not in due])
        sent = 0
        for channel, url in self.urls.items():
            with self.catalog.connect() as conn:
                before = notifications.severities_notified(
                    conn, sorted({r.finding_id for r in due}), channel
                )
                seen = notifications.severities_notified(
                    conn, sorted({r.finding_id for r in due}), SEEN
                )
            for row in due:
                severity = str(row.stored.finding.severity)
                if severity in before.get(row.finding_id, set()):
                    continue
                earlier = before.get(row.finding_id, set()) | seen.get(row.finding_id, set())
                kind = "escalated" if earlier else "new"
                sent += self._deliver(channel, url, row, severity, kind)
        return sent

    def _deliver(self, channel: str, url: str, row: Row, severity: str, kind: str) -> int:
        if not notifications.claim(self.catalog, row.finding_id, channel, severity):
            return 0  # another process (a gateway) took it
        body = CHANNELS[channel][1](
            row.stored.finding, row.finding_id, row.cluster, kind, self.dashboard_url
        )
        try:
            self.send(url, body, self.timeout_s)
        except Exception as exc:  # any failure: release, the next round retries
            log.warning("notify: %s delivery of %s failed (%s); retrying next round",
                        channel, row.finding_id, exc)  # fmt: skip
            with self.catalog.begin() as conn:
                notifications.release(conn, row.finding_id, channel, severity)
            return 0
        return 1

    def _record_seen(self, below: list[Row]) -> None:
        """Remember the severities seen below the threshold (what makes a later one escalated)."""
        if not below:
            return
        with self.catalog.connect() as conn:
            known = notifications.severities_notified(
                conn, sorted({r.finding_id for r in below}), SEEN
            )
        for row in below:
            severity = str(row.stored.finding.severity)
            if severity not in known.get(row.finding_id, set()):
                notifications.claim(self.catalog, row.finding_id, SEEN, severity)


def from_settings(catalog: Engine, settings: Any) -> Notifier | None:
    """The notifier the `notify.*` settings describe; None when no channel has a URL."""
    notify = settings.notify
    urls = {name: getattr(notify, key) for name, (key, _) in CHANNELS.items()}
    urls = {name: url for name, url in urls.items() if url}
    if not urls:
        return None
    try:
        least = Severity(notify.min_severity)
    except ValueError:
        choices = ", ".join(s.value for s in Severity)
        raise ConfigError(
            f"notify.min_severity must be one of {choices}, not {notify.min_severity!r}"
        ) from None
    return Notifier(
        catalog,
        urls,
        min_severity=least,
        lookback_s=notify.lookback_s,
        timeout_s=notify.timeout_s,
        dashboard_url=settings.reports.dashboard_url,  # the link reports carry too
    )


def setup(server: Any) -> None:
    """Run the notifier on a thread of its own while the server runs (nothing when no URL is set)."""
    notifier = from_settings(server.catalog, server.settings)
    if notifier is None:
        return
    interval_s = server.settings.notify.interval_s
    stop = threading.Event()
    threads: list[threading.Thread] = []

    def loop() -> None:
        while not stop.is_set():
            try:
                notifier.round()
            except Exception:  # a catalog hiccup: log, and try again next round
                log.exception("notify: round failed")
            stop.wait(interval_s)

    def on_start(_server: Any) -> None:
        thread = threading.Thread(target=loop, name="fleetscope-notify", daemon=True)
        thread.start()
        threads.append(thread)

    def on_stop(_server: Any) -> None:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)

    server.on_start.append(on_start)
    server.on_stop.append(on_stop)
