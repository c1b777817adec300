"""Produce weekly reports: build, render (HTML, PDF, Markdown), write to a folder, and mail once.

The one entry point the CLI, the embedded scheduler and a Celery beat task call. Sending is
idempotent per (kind, scope, week) through the catalog's `report_runs` (a claimed run is not sent
again; a failed send rolls its claim back so a retry sends). Files are rewritten on every run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from analyzers.accounting.cost import Prices
from analyzers.reports import deliver
from analyzers.reports.build import Scope, build_weekly
from analyzers.reports.catalog_frames import catalog_frame
from analyzers.reports.pdf import html_to_pdf
from analyzers.reports.render import title, to_html, to_markdown
from analyzers.reports.week import IsoWeek
from fleetscope.errors import SourceUnavailableError
from fleetscope.settings import Settings

if TYPE_CHECKING:
    import duckdb
    import sqlalchemy

KIND = "weekly"


@dataclass(frozen=True)
class ReportFiles:
    html: Path
    markdown: Path
    pdf: Path | None
    sent_to: tuple[str, ...] = ()
    already_sent: bool = False


def out_dir(settings: Settings) -> Path:
    return settings.path(settings.reports.out_dir, "reports")


def write_weekly(
    settings: Settings,
    con: duckdb.DuckDBPyConnection,
    catalog: sqlalchemy.Engine,
    week: IsoWeek,
    scope: Scope,
    folder: Path,
    *,
    pdf: bool = True,
) -> ReportFiles:
    """Build one report and write `<folder>/<week>/<scope>.{html,md,pdf}`."""
    report = build_weekly(
        con,
        catalog,
        week,
        scope,
        trend_weeks=settings.reports.trend_weeks,
        default_interval_s=settings.agent.interval_s,
        max_gap_s=settings.analyzers.max_gap_s,
        prices=Prices.from_settings(settings),
    )
    target = folder / str(week)
    target.mkdir(parents=True, exist_ok=True)
    html_path = target / f"{scope.slug}.html"
    html_path.write_text(to_html(report, settings.reports.dashboard_url), "utf-8")
    md_path = target / f"{scope.slug}.md"
    md_path.write_text(to_markdown(report), "utf-8")
    pdf_path = html_to_pdf(html_path, target / f"{scope.slug}.pdf") if pdf else None
    return ReportFiles(html_path, md_path, pdf_path)


def send_once(
    settings: Settings,
    catalog: sqlalchemy.Engine,
    week: IsoWeek,
    scope: Scope,
    files: ReportFiles,
) -> ReportFiles:
    """Mail a written report unless this (kind, scope, week) was sent before."""
    from warehouse.catalog.reports import claim_report_run, mark_report_sent

    to = deliver.recipients(settings, scope, catalog_frame(catalog, "jobs"))
    if not to:
        raise SourceUnavailableError(f"no recipients for the {scope.label} report")
    subject = f"[fleetscope] {title(scope, week)}"
    with catalog.begin() as conn:
        if not claim_report_run(conn, KIND, scope.slug, str(week)):
            return ReportFiles(files.html, files.markdown, files.pdf, already_sent=True)
        message = deliver.build_message(
            settings,
            to,
            subject,
            files.html.read_text("utf-8"),
            files.markdown.read_text("utf-8"),
            files.pdf,
        )
        deliver.send(settings, message)  # raises: the claim rolls back with the transaction
        mark_report_sent(
            conn,
            KIND,
            scope.slug,
            str(week),
            sent_at=datetime.now(UTC),
            recipients=", ".join(to),
            path=str(files.html),
        )
    return ReportFiles(files.html, files.markdown, files.pdf, sent_to=tuple(to))


def open_sources(
    settings: Settings, start: datetime, end: datetime
) -> tuple[duckdb.DuckDBPyConnection, sqlalchemy.Engine]:
    """The telemetry of [start, end) in the deployment's mode (warehouse.read.window_reader: the
    embedded segments, or the fleet's Iceberg tables) and the catalog."""
    from warehouse.catalog import connect as connect_catalog
    from warehouse.read.window_reader import open_window
    from warehouse.storage.paths import WarehousePaths

    catalog_url = WarehousePaths.from_settings(settings).catalog_url
    return open_window(settings, start, end), connect_catalog(catalog_url)


def report_span(settings: Settings, week: IsoWeek) -> tuple[datetime, datetime]:
    """What a weekly report reads: its week and the trend weeks before it."""
    return week.shift(1 - settings.reports.trend_weeks).start, week.end


def weeks_with_data(settings: Settings) -> list[IsoWeek]:
    """The ISO weeks in which the warehouse holds GPU samples, oldest first, from the days its
    metadata lists (warehouse.read.window_reader.sample_days: no sample is read)."""
    from warehouse.read.window_reader import sample_days

    weeks = {
        IsoWeek.containing(datetime.combine(day, datetime.min.time(), UTC))
        for day in sample_days(settings)
    }
    return sorted(weeks, key=lambda w: w.start)


def scopes_for(catalog: sqlalchemy.Engine) -> list[Scope]:
    """Every report a weekly run produces: the fleet, each team and each user in the catalog."""
    jobs = catalog_frame(catalog, "jobs")
    teams = sorted(jobs["team"].dropna().unique()) if not jobs.empty else []
    users = sorted(jobs["user"].dropna().unique()) if not jobs.empty else []
    return [
        Scope("admin"),
        *(Scope("team", str(t)) for t in teams),
        *(Scope("user", str(u)) for u in users),
    ]


def run_weekly(
    settings: Settings, week: IsoWeek, *, send: bool, pdf: bool = True
) -> dict[str, ReportFiles]:
    """The scheduled job: every scope's report for `week`, written and (if `send`) mailed once."""
    con, catalog = open_sources(settings, *report_span(settings, week))
    results: dict[str, ReportFiles] = {}
    for scope in scopes_for(catalog):
        files = write_weekly(settings, con, catalog, week, scope, out_dir(settings), pdf=pdf)
        if send:
            files = send_once(settings, catalog, week, scope, files)
        results[scope.slug] = files
    return results
