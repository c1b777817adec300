"""What a notification says, in each channel's own JSON.

- `alertmanager`: the body Alertmanager POSTs to a webhook receiver (webhook_config, payload
  version 4: https://prometheus.io/docs/alerting/latest/configuration/#webhook_config), one alert
  per finding, so any receiver written for Alertmanager (a paging bridge, a ticket bot) takes
  fleetscope's findings unchanged. Labels follow the shipped rule FleetscopeCriticalFinding
  (alertname, severity, rule, team) plus job_id, cluster, host and finding_id.
- `slack`: a Slack incoming-webhook message (`{"text": ...}` in Slack's mrkdwn,
  https://api.slack.com/messaging/webhooks), which Mattermost and Rocket.Chat also accept.
"""

from __future__ import annotations

import hashlib
from typing import Any

from analyzers.findings import Finding
from analyzers.plain import UNPRICED, priced

ZERO_TIME = "0001-01-01T00:00:00Z"  # Alertmanager's "no end" for a firing alert


def labels(finding: Finding, finding_id: str, cluster: str | None, kind: str) -> dict[str, str]:
    name = (
        "FleetscopeCriticalFinding" if str(finding.severity) == "critical" else "FleetscopeFinding"
    )
    found = {
        "alertname": name,
        "severity": str(finding.severity),
        "rule": finding.rule_id,
        "team": finding.team or "",
        "job_id": finding.job_id or "",
        "cluster": cluster or "",
        "host": finding.host or "",
        "finding_id": finding_id,
        "notification": kind,  # new | escalated
    }
    return {k: v for k, v in found.items() if v}  # Prometheus: an empty label is no label


def summary(finding: Finding, kind: str) -> str:
    who = ", ".join(
        part
        for part in (
            f"job {finding.job_id}" if finding.job_id else "",
            f"team {finding.team}" if finding.team else "",
            f"host {finding.host}" if finding.host else "",
        )
        if part
    )
    title = finding.title or finding.rule_id
    gain = (
        f"{finding.wasted_gpu_hours:.1f} GPU-hours recoverable"
        if priced(finding.estimate_method)
        else UNPRICED
    )
    return f"{kind} {finding.severity} finding {finding.rule_id}: {title} ({who}); {gain}"


def alertmanager(
    finding: Finding, finding_id: str, cluster: str | None, kind: str, link: str
) -> dict[str, Any]:
    found = labels(finding, finding_id, cluster, kind)
    annotations = {
        "summary": summary(finding, kind),
        "description": finding.recommendation
        or f"Run `fleetscope findings --rule {finding.rule_id}` for the evidence and the fix.",
    }
    window_end = finding.window_end.isoformat().replace("+00:00", "Z")
    return {
        "version": "4",
        "groupKey": f'{{}}:{{finding_id="{finding_id}"}}',
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "fleetscope",
        "groupLabels": {"finding_id": finding_id},
        "commonLabels": found,
        "commonAnnotations": annotations,
        "externalURL": link,
        "alerts": [
            {
                "status": "firing",
                "labels": found,
                "annotations": annotations,
                "startsAt": window_end,
                "endsAt": ZERO_TIME,
                "generatorURL": link,
                "fingerprint": hashlib.sha256(finding_id.encode()).hexdigest()[:16],
            }
        ],
    }


def slack(
    finding: Finding, finding_id: str, cluster: str | None, kind: str, link: str
) -> dict[str, Any]:
    lines = [f"*fleetscope: {summary(finding, kind)}*"]
    if finding.recommendation:
        lines.append(finding.recommendation)
    where = f"cluster {cluster}, " if cluster else ""
    lines.append(
        f"{where}finding `{finding_id}`" + (f" <{link}|open the dashboard>" if link else "")
    )
    return {"text": "\n".join(lines)}
