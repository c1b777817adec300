"""The metrics window's per-hour usage rows, kept between refreshes of the findings and GPU-hours
exporter (`analyzers.prometheus_export`), so a refresh reads the hours that can still change, not
the whole window (24 h of the whole fleet's samples, which in fleet mode is a scan of the object
store into memory).

The rows are `analyzers.accounting.usage.gpu_buckets`'s in hour buckets, allocated rows only (what
`job_efficiency` reads). An hour's rows are final once every sample they depend on has arrived:
the hour's own samples, and the successor of each, which gives a sample its seconds when it comes
within `max_gap_s` (`analyzers.accounting.sql`). A refresh at `now` has every sample before
`now - lateness_s` (the assumption the counters make too), so the hours that end at least
`max_gap_s` before that are final: the next refresh keeps them and re-reads from the start of the
first hour that is not (`HourRows.read_from_s`) to its own `now`, and replaces those hours' rows.

What differs from reading the whole window every refresh (docs/deploy.md):
- the window is whole clock hours: from the start of the hour `window_s` before now (up to an hour
  more than `window_s`);
- a sample arriving more than `lateness_s` after its time is not in the efficiency until its hour
  leaves the window (or a new term, or a restart, reads the window again), as the counters never
  count it before a restart. Until a refresh finds a sample in the window it keeps nothing, so
  the history a fresh server or fleet receives first (a spool, an import) is read whole;
- a sample that counts its GPU's typical interval (the last one of its GPU and job, or one before
  a gap over `max_gap_s`) takes the median gap of the read that last covered its hour, not of the
  whole window: the same whenever a GPU keeps its sample interval.

Pure data: never reads storage (the exporter reads and passes the rows in); pandas is imported
only to update the rows, on the refresh thread, not when the server loads the plug-in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from analyzers.run.window import HOUR_S

if TYPE_CHECKING:
    from collections.abc import Sequence

    import pandas as pd

# One row per (bucket, cluster, host, gpu_index, job_id): the order a from-scratch read is put in.
ROW_KEY: Sequence[str] = ("bucket", "cluster", "host", "gpu_index", "job_id")


def hour_start_s(epoch_s: float) -> float:
    """The start of the clock hour holding `epoch_s` (epoch seconds)."""
    return epoch_s // HOUR_S * HOUR_S


def window_start_s(now_s: float, window_s: float) -> float:
    """Where the efficiency window starts: the start of the hour `window_s` before `now_s`."""
    return hour_start_s(now_s - window_s)


@dataclass(frozen=True)
class HourRows:
    """Allocated hour-bucket rows of the window, final before `read_from_s(...)`.

    `complete_s`: every sample before it had arrived when the rows were read (None: nothing kept,
    the next refresh reads the whole window).
    """

    rows: pd.DataFrame | None = None  # None: never read
    complete_s: float | None = None

    def read_from_s(self, now_s: float, window_s: float, max_gap_s: float) -> float:
        """Where a refresh at `now_s` reads from: the first hour whose rows may still change
        (its last sample's successor may be missing, module docstring), else the window's start."""
        start_s = window_start_s(now_s, window_s)
        if self.complete_s is None:
            return start_s
        first_open_s = hour_start_s(self.complete_s - max_gap_s)
        if first_open_s >= now_s:  # the clock went back: nothing kept can be trusted
            return start_s
        return max(start_s, first_open_s)

    def updated(
        self,
        fresh: pd.DataFrame,
        read_from_s: float,
        now_s: float,
        window_s: float,
        lateness_s: float,
    ) -> HourRows:
        """The rows kept before `read_from_s` and still in the window, with `fresh` (the rows of
        [read_from_s, now_s)) in their place; complete as of this refresh."""
        import pandas as pd  # the exporter's refresh thread only, not the server's start-up

        if self.complete_s is None and fresh.empty:  # no sample in the window yet: read all again
            return HourRows(fresh, None)
        start = pd.Timestamp(window_start_s(now_s, window_s), unit="s", tz="UTC")
        parts = [fresh[fresh["job_id"].notna()]]
        if self.rows is not None:
            cut = pd.Timestamp(read_from_s, unit="s", tz="UTC")
            kept = self.rows[(self.rows["bucket"] >= start) & (self.rows["bucket"] < cut)]
            parts.insert(0, kept)
        parts = [part for part in parts if not part.empty] or parts[-1:]
        rows = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
        rows = rows[rows["bucket"] >= start]
        rows = rows.sort_values(list(ROW_KEY), kind="stable").reset_index(drop=True)
        return HourRows(rows, now_s - lateness_s)
