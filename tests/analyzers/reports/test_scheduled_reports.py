"""The weekly schedule: each completed week is reported once per process, from the clock's week."""

from __future__ import annotations

from datetime import UTC, datetime

from analyzers.reports.scheduled import WeeklyReports
from analyzers.reports.week import IsoWeek
from analyzers.run.celery_app import make_app
from fleetscope.settings import load_settings
from tests.analyzers.reports.conftest import ReportWarehouse


def test_the_last_complete_week_is_reported_once(report_warehouse: ReportWarehouse) -> None:
    settings = load_settings(env=report_warehouse.env)
    wednesday_of_w48 = datetime(2026, 11, 25, 9, tzinfo=UTC)
    reports = WeeklyReports(settings, clock=lambda: wednesday_of_w48)

    assert reports.check() == IsoWeek(2026, 47)
    reports_dir = report_warehouse.data_dir / "reports"
    written = sorted(str(p.relative_to(reports_dir)) for p in reports_dir.rglob("*.html"))
    assert [name.replace("2026-W47", "W") for name in written] == [
        f"W/{scope}.html"
        for scope in ("fleet", "team-nlp", "team-vision", "user-alice", "user-bob")
    ]
    assert reports.check() is None  # the same week again: nothing to do


def test_celery_beat_runs_the_reports_on_monday_morning() -> None:
    schedule = make_app(load_settings(env={})).conf.beat_schedule["fleetscope-weekly-reports"]
    assert schedule["task"] == "fleetscope.weekly_reports"
    cron = schedule["schedule"]
    assert (cron.minute, cron.hour, cron.day_of_week) == ({0}, {6}, {1})
