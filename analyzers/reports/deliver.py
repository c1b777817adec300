"""Report delivery by email: the HTML as the body, the PDF attached, the Markdown as plain text.

Recipients come from the catalog: a user's report goes to `<user>@<reports.email_domain>`, a
team's to every user the catalog lists for the team's jobs, the fleet report to
`reports.admin_recipients`. Plain SMTP via the standard library (`reports.smtp_host`). Never
renders or queries telemetry.
"""

from __future__ import annotations

import smtplib
from collections.abc import Sequence
from email.message import EmailMessage
from pathlib import Path

import pandas as pd

from analyzers.reports.build import Scope
from fleetscope.errors import ConfigError, SourceUnavailableError
from fleetscope.settings import Settings


def recipients(settings: Settings, scope: Scope, jobs: pd.DataFrame) -> list[str]:
    """Addresses for a report of `scope`; `jobs` is the catalog's jobs table (user, team)."""
    if scope.kind == "admin":
        listed = settings.reports.admin_recipients
        return sorted({a.strip() for a in listed.split(",") if a.strip()})
    domain = settings.reports.email_domain
    if not domain:
        return []
    if scope.kind == "user":
        users = {scope.value}
    else:
        users = (
            set(jobs.loc[jobs["team"] == scope.value, "user"].dropna()) if not jobs.empty else set()
        )
    return sorted(f"{user}@{domain}" for user in users)


def build_message(
    settings: Settings,
    to: Sequence[str],
    subject: str,
    html: str,
    markdown: str,
    pdf: Path | None,
) -> EmailMessage:
    message = EmailMessage()
    message["From"] = settings.reports.from_addr
    message["To"] = ", ".join(to)
    message["Subject"] = subject
    message.set_content(markdown)
    message.add_alternative(html, subtype="html")
    if pdf is not None:
        message.add_attachment(
            pdf.read_bytes(), maintype="application", subtype="pdf", filename=pdf.name
        )
    return message


def send(settings: Settings, message: EmailMessage) -> None:
    host = settings.reports.smtp_host
    if not host:
        raise ConfigError("reports.smtp_host is empty: set it to deliver reports by email")
    port = settings.reports.smtp_port
    try:
        with smtplib.SMTP(host, port, timeout=30) as smtp:
            smtp.send_message(message)
    except (OSError, smtplib.SMTPException) as exc:
        raise SourceUnavailableError(f"SMTP {host}:{port}: {exc}") from exc
