"""ISO weeks as report periods: `2026-W47` is Monday 00:00 UTC to the next Monday 00:00 UTC.

A report's window comes from its week, never from `now()`, so a late or repeated run reports the
same numbers (design.md: windows from the schedule time).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from fleetscope.errors import ConfigError

_PATTERN = re.compile(r"^(\d{4})-W(\d{2})$")


@dataclass(frozen=True, order=True)
class IsoWeek:
    year: int
    week: int

    @classmethod
    def parse(cls, text: str) -> IsoWeek:
        match = _PATTERN.match(text.strip())
        if match is None:
            raise ConfigError(f"week {text!r}: expected ISO week like 2026-W47")
        year, week = int(match[1]), int(match[2])
        try:
            datetime.fromisocalendar(year, week, 1)
        except ValueError as exc:
            raise ConfigError(f"week {text!r}: {exc}") from exc
        return cls(year, week)

    @classmethod
    def containing(cls, moment: datetime) -> IsoWeek:
        year, week, _day = moment.astimezone(UTC).isocalendar()
        return cls(year, week)

    @classmethod
    def last_complete(cls, now: datetime) -> IsoWeek:
        """The most recent week that has ended by `now` (what a Monday-morning run reports)."""
        return cls.containing(now).shift(-1)

    @property
    def start(self) -> datetime:
        return datetime.fromisocalendar(self.year, self.week, 1).replace(tzinfo=UTC)

    @property
    def end(self) -> datetime:
        return self.start + timedelta(days=7)

    def shift(self, weeks: int) -> IsoWeek:
        return IsoWeek.containing(self.start + timedelta(weeks=weeks))

    def __str__(self) -> str:
        return f"{self.year}-W{self.week:02d}"


def default_week(now: datetime, with_data: list[IsoWeek]) -> tuple[IsoWeek, str | None]:
    """The week `report weekly` reports when none is named, and a note when it is not the usual.

    The usual is the last complete week (a Monday-morning run). When that week holds no samples, a
    report of zeros helps nobody (a demo started today has data only in the current week): the
    latest week that has data is reported instead, and the note says so and lists the weeks that
    have data. With no data at all the last complete week stands, and the note says why it is empty.
    """
    usual = IsoWeek.last_complete(now)
    if usual in with_data:
        return usual, None
    if not with_data:
        return usual, f"no GPU samples in the warehouse: the report for {usual} is empty"
    latest = max(with_data)
    listed = ", ".join(str(w) for w in sorted(with_data))
    partial = " (in progress)" if latest == IsoWeek.containing(now) else ""
    return latest, (
        f"{usual}, the last complete week, holds no GPU samples; reporting {latest}{partial}, "
        f"the latest week with data (weeks with data: {listed}; pick one with --week)"
    )
