"""Schedule arithmetic every room shares: times aligned down to whole steps since the Unix epoch.

Its own module so the sketch tiers (analyzers.quantiles.store_rows) can align panes without
importing the scheduler, which imports the runner, which imports the tiers (the import cycle this
broke).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fleetscope.errors import ConfigError

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def align_down(ts: datetime, step_s: float) -> datetime:
    """`ts` rounded down to a multiple of `step_s` seconds since the Unix epoch (UTC)."""
    if step_s <= 0:
        raise ConfigError(f"a schedule step must be positive, got {step_s}")
    seconds = (ts.astimezone(UTC) - EPOCH).total_seconds()
    return EPOCH + timedelta(seconds=(seconds // step_s) * step_s)
