"""Weekly reports on a schedule: a server plug-in (embedded mode) and a Celery beat task (fleet mode).

Both ask the same question at each check: has this process reported the last complete ISO week?
If not, `run_weekly` writes every scope's report (each team, each user, the fleet) and, when
`reports.smtp_host` is set, mails each one once; the catalog's `report_runs` claims make a repeated
run, a restart or a second scheduler send nothing twice. The week comes from the clock at the check,
never from when the previous run happened, so a server that was down on Monday catches up.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from analyzers.reports.week import IsoWeek
from fleetscope.settings import Settings

log = logging.getLogger(__name__)

CHECK_EVERY_S = 3600.0
FIRST_CHECK_AFTER_S = 300.0  # let a starting server take its first batches before rendering PDFs


class WeeklyReports:
    """Runs the reports of each completed week once per process; `check` is the whole schedule."""

    def __init__(
        self, settings: Settings, clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.reported: set[IsoWeek] = set()

    def check(self) -> IsoWeek | None:
        """Report the last complete week if this process has not; returns the week it reported."""
        from analyzers.reports.runner import run_weekly

        week = IsoWeek.last_complete(self.clock())
        if week in self.reported:
            return None
        send = bool(self.settings.reports.smtp_host)
        results = run_weekly(self.settings, week, send=send)
        self.reported.add(week)
        log.info("weekly reports for %s: %d scopes (mail: %s)", week, len(results), send)
        return week


# Server plug-in order (fleetscope.plugins): after the scheduler whose findings the reports read.
PLUGIN_ORDER = 30
# The embedded server only (fleetscope.plugins.server_modes): in fleet mode the weekly reports are
# the Celery beat task, once for the fleet, not a thread on every gateway.
SERVER_MODES = ("embedded",)


def setup(server: Any) -> None:
    """Server plug-in (`server.plugins`): in embedded mode, check hourly in a daemon thread."""
    if server.settings.scheduler.mode != "embedded":
        return
    stop = threading.Event()
    reports = WeeklyReports(server.settings)

    def loop() -> None:
        wait_s = FIRST_CHECK_AFTER_S
        while not stop.wait(wait_s):
            try:
                reports.check()
            except Exception:  # a report failure must not stop ingest; the next check retries
                log.exception("weekly reports failed")
            wait_s = CHECK_EVERY_S

    thread = threading.Thread(target=loop, name="fleetscope-weekly-reports", daemon=True)
    server.on_start.append(lambda _srv: thread.start())
    server.on_stop.append(lambda _srv: stop.set())
