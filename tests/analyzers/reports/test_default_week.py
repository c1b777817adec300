"""`report weekly` without --week: the last complete week, else the latest week that has data."""

from __future__ import annotations

from datetime import UTC, datetime

from analyzers.reports.week import IsoWeek, default_week

NOW = datetime(2026, 11, 24, 15, 0, tzinfo=UTC)  # a Tuesday of 2026-W48


def test_the_last_complete_week_when_it_has_data() -> None:
    assert default_week(NOW, [IsoWeek(2026, 46), IsoWeek(2026, 47)]) == (IsoWeek(2026, 47), None)


def test_a_demo_started_today_reports_the_current_week_and_says_so() -> None:
    week, note = default_week(NOW, [IsoWeek(2026, 48)])
    assert week == IsoWeek(2026, 48)
    assert note == (
        "2026-W47, the last complete week, holds no GPU samples; reporting 2026-W48 (in progress), "
        "the latest week with data (weeks with data: 2026-W48; pick one with --week)"
    )


def test_old_data_only_names_the_weeks_that_have_it() -> None:
    week, note = default_week(NOW, [IsoWeek(2026, 2), IsoWeek(2026, 3)])
    assert week == IsoWeek(2026, 3)
    assert note is not None and "weeks with data: 2026-W02, 2026-W03" in note
    assert "(in progress)" not in note


def test_an_empty_warehouse_keeps_the_usual_week_and_says_why_it_is_empty() -> None:
    assert default_week(NOW, []) == (
        IsoWeek(2026, 47),
        "no GPU samples in the warehouse: the report for 2026-W47 is empty",
    )
