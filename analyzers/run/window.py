"""The one time window of the analyzers: what a rule run covers and what a page or report reads.

One class for both uses (issue 14 had two): an analyzer run is a window of the fleet cut into
`partitions` slices, of which it covers `partition`; the usage accounting, the reports and the
dashboard read a window in buckets of `bucket_s` seconds. Either use leaves the other's fields at
their defaults: a rule never looks at `bucket_s`, and a page's window is the whole fleet.

This module must never read storage or the clock: a window is a value, built by the schedule, a
page or a report from times it is given.
"""

from __future__ import annotations

import dataclasses
from dataclasses import KW_ONLY, dataclass
from datetime import UTC, datetime, timedelta

from fleetscope.errors import ConfigError

HOUR_S = 3600.0


def bucket_for(length: timedelta) -> int:
    """Bucket size that keeps a chart to a few hundred points: 1 min up to 6 h, 5 min up to 2 days,
    then 1 h (7 days at 1 h is 168 points per series)."""
    if length <= timedelta(hours=6):
        return 60
    if length <= timedelta(days=2):
        return 300
    return 3600


@dataclass(frozen=True, slots=True)
class Window:
    """A half-open time range [start, end), which slice of the fleet, read in which buckets.

    For an analyzer run `start` is aligned to the identity bucket (a finding's `bucket_start`) and
    `end` is where the data considered ends (the schedule time minus the lateness allowance, or the
    bucket's end); the fleet is cut into `partitions` slices by the analyzer's partition key and
    this run covers `partition`. A reader of accounted usage reads it in buckets of `bucket_s`
    seconds (keyword only; left out: `bucket_for` the window's length).
    """

    start: datetime
    end: datetime
    partition: int = 0
    partitions: int = 1
    _: KW_ONLY
    bucket_s: int = 0
    # A live window (issue 31) reaches past `analyzers.lateness_s`: its data up to here is
    # settled, and only that much is kept as quantile panes (a pane behind the sketch store's
    # mark is never rebuilt for a straggler). None: all of it.
    settled_end: datetime | None = None

    def __post_init__(self) -> None:
        for name in ("start", "end"):
            value = getattr(self, name)
            if value.tzinfo is None:
                raise ConfigError(f"window {name} {value!r} must be timezone-aware")
            object.__setattr__(self, name, value.astimezone(UTC))
        if self.end <= self.start:
            raise ConfigError(f"empty window: {self.start} .. {self.end}")
        if not 0 <= self.partition < self.partitions:
            raise ConfigError(f"partition {self.partition} not in 0..{self.partitions - 1}")
        if self.settled_end is not None:
            settled = self.settled_end.astimezone(UTC)
            object.__setattr__(self, "settled_end", min(max(settled, self.start), self.end))
        if self.bucket_s < 0:
            raise ConfigError(f"window bucket of {self.bucket_s} s: must be positive")
        if not self.bucket_s:
            object.__setattr__(self, "bucket_s", bucket_for(self.end - self.start))

    @property
    def hours(self) -> float:
        return (self.end - self.start).total_seconds() / HOUR_S

    def key(self) -> str:
        return f"{self.start:%Y%m%dT%H%M%S}-{self.end:%Y%m%dT%H%M%S}-p{self.partition}of{self.partitions}"

    def previous(self) -> Window:
        """The window of the same length just before this one (for week-over-week trends)."""
        length = self.end - self.start
        return dataclasses.replace(self, start=self.start - length, end=self.start)
