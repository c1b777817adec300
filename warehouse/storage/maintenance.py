"""The server's background pass: compaction, roll-ups, retention, purge of retired segments.

One thread runs a pass every `warehouse.maintenance_interval_s`; retention runs at most hourly
(a DELETE scans the tables). Between passes the same thread rolls up what was published since,
every `warehouse.rollup_interval_s`: roll-ups add only the new segments' rows (warehouse.read.rollup_delta), so pages
and the CLI read a week from roll-ups and at most that much raw tail, however fast data lands. Each step's failure is logged and the next step still runs: a bad day
of segments must not stop compaction of the others. This module must never run outside the
server process: the store's manifest has one owner.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from warehouse.read.rollups import update_rollups
from warehouse.storage.compaction import compact
from warehouse.storage.retention import expire
from warehouse.storage.segments import SegmentStore
from warehouse.storage.writer import Writer

log = logging.getLogger(__name__)

RETENTION_EVERY_S = 3600.0
# Roll-ups follow ingest this often by default (`warehouse.rollup_interval_s`): a page merges at
# most this much raw tail after the minute roll-ups, a few thousand rows even at 1,000 GPUs. Each
# step has a fixed cost (a DuckDB connection, a roll-up part per table written and fsynced, a
# manifest swap): at 5 s the roll-ups were 0.87 of the embedded server's 3.31 CPU-s a minute at
# 16 hosts and 1 s scrapes, at 30 s 0.16 of 2.37 (bench/RESULTS.md, "Where the server's CPU goes
# on the ingest log").
ROLLUP_EVERY_S = 30.0


@dataclass(frozen=True)
class MaintenanceConfig:
    interval_s: float
    target_bytes: int
    grace_s: float
    retention_days: int
    rollup_interval_s: float = ROLLUP_EVERY_S


class Maintenance:
    def __init__(
        self,
        store: SegmentStore,
        writer: Writer | None,
        config: MaintenanceConfig,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._writer = writer
        self._config = config
        self._clock = clock
        self._last_retention = float("-inf")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._one_pass_at_a_time = threading.Lock()

    def run_once(self) -> dict[str, int]:
        """One pass; returns what each step did (merged files, days rolled up, ...).

        Passes never overlap: an explicit call (tests, `fleetscope warehouse` commands) waits for
        the background thread's pass, so two compactions never race for the same parts.
        """
        with self._one_pass_at_a_time:
            return self._pass()

    def roll_up_once(self) -> int:
        """Roll up what was published since the last step; returns the days touched."""
        with self._one_pass_at_a_time:
            try:
                return update_rollups(self._store)
            except Exception:
                log.exception("maintenance step rolled_up_days failed")
                return 0

    def _pass(self) -> dict[str, int]:
        done: dict[str, int] = {}
        now = self._clock()
        steps: list[tuple[str, Callable[[], int]]] = [
            ("compacted", lambda: compact(self._store, self._config.target_bytes)),
            ("rolled_up_days", lambda: update_rollups(self._store)),
        ]
        if now - self._last_retention >= RETENTION_EVERY_S:
            self._last_retention = now
            today = datetime.fromtimestamp(now, UTC).date()
            steps.append(
                (
                    "expired",
                    lambda: expire(self._store, self._writer, self._config.retention_days, today),
                )
            )
        steps.append(("purged", lambda: self._store.purge_retired(self._config.grace_s)))
        for name, step in steps:
            try:
                done[name] = step()
            except Exception:
                log.exception("maintenance step %s failed", name)
        return done

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name="fleetscope-maintenance", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        tick = min(self._config.rollup_interval_s, self._config.interval_s)
        last_pass = time.monotonic()
        while not self._stop.wait(tick):
            if time.monotonic() - last_pass >= self._config.interval_s - tick / 2:
                last_pass = time.monotonic()
                self.run_once()
            else:
                self.roll_up_once()
