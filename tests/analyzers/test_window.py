"""The one Window: a rule run's (partitions) and a usage read's (buckets) in one value."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from analyzers.run.window import Window, bucket_for
from fleetscope.errors import ConfigError

T0 = datetime(2025, 3, 3, tzinfo=UTC)


def test_a_windows_bucket_follows_its_length_unless_given() -> None:
    for length in (timedelta(hours=1), timedelta(days=1), timedelta(days=7)):
        assert Window(T0, T0 + length).bucket_s == bucket_for(length)
    assert Window(T0, T0 + timedelta(days=7), bucket_s=86400).bucket_s == 86400


def test_the_previous_window_keeps_length_bucket_and_partition() -> None:
    window = Window(T0, T0 + timedelta(days=1), 1, 3, bucket_s=300)
    before = window.previous()
    assert (before.start, before.end) == (T0 - timedelta(days=1), T0)
    assert (before.bucket_s, before.partition, before.partitions) == (300, 1, 3)
    assert window.key() == "20250303T000000-20250304T000000-p1of3"


def test_times_are_utc_and_a_window_is_never_empty_or_naive() -> None:
    plus_two = timezone(timedelta(hours=2))
    window = Window(datetime(2025, 3, 3, 2, tzinfo=plus_two), T0 + timedelta(hours=1))
    assert window.start == T0 and window.start.tzinfo is UTC
    for bad in (
        lambda: Window(T0, T0),
        lambda: Window(T0.replace(tzinfo=None), T0 + timedelta(hours=1)),
        lambda: Window(T0, T0 + timedelta(hours=1), 2, 2),
        lambda: Window(T0, T0 + timedelta(hours=1), bucket_s=-60),
    ):
        with pytest.raises(ConfigError):
            bad()
