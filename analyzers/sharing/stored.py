"""The sharing plan the scheduled analyzer pass stores, and which stored plan answers a page's
window (issue 31: the Sharing page's first open computed the plan, 3.4-4.4 s of Python on 7 days
x 1,000 GPUs; a stored document is read in milliseconds).

The step: after a scheduled pass lands a window (the embedded scheduler's tick, `fleetscope
analyze`, Celery's window task or fleet mode's landing), when the newest stored plan of
`analyzers.sharing_days` ends `analyzers.sharing_every_s` or more before the pass's data end, the
plan over the `sharing_days` before that end (the page's alignment, `aligned`; capped at just past
the newest sample, as a page's window is) is computed as `fleetscope plan sharing` computes it,
the jobs' data-wait shares included, and stored in the catalog (`warehouse.catalog.plans`).

The rule a page follows (`shown_for`): a stored plan answers the window picked in the sidebar when
it covers the same length of time (the preset's, or the custom range's) and ends at or before the
window's end, at most one step (`sharing_every_s` + `analyzers.lateness_s` + one
`scheduler.interval_s`) before it. Otherwise the page computes the plan for its window, as
`fleetscope plan sharing` would. The page says which it shows, with the plan's window and when it
was computed.

This module must never choose the pass's windows (analyzers.run.schedule does).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from analyzers.run.window import Window

if TYPE_CHECKING:
    import duckdb
    from sqlalchemy import Engine

    from fleetscope.settings import Settings
    from warehouse.catalog.plans import StoredPlan

__all__ = ["KIND", "PlanStep", "plan_document", "read_stored", "shown_for", "store_due_plan"]

KIND: Final = "sharing"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlanStep:
    """How the scheduled pass keeps the sharing plan: its window and how often it is renewed."""

    days: float = 7.0  # 0: no plan stored
    every_s: float = 3600.0
    slack_s: float = 180.0  # the pass's lateness and one tick: how far behind a live pass runs

    @classmethod
    def from_settings(cls, settings: Settings) -> PlanStep:
        a = settings.analyzers
        slack = a.lateness_s + settings.scheduler.interval_s
        return cls(a.sharing_days, a.sharing_every_s, slack)

    @property
    def window_s(self) -> float:
        return self.days * 86400.0

    @property
    def tolerance(self) -> timedelta:
        """How far a stored plan's end may lie before a page's window end and still answer it."""
        return timedelta(seconds=self.every_s + self.slack_s)


def plan_window(end: datetime, window_s: float) -> Window:
    """The window of `window_s` seconds ending at `end`, aligned as a page's is."""
    from analyzers.accounting.usage import aligned

    return aligned(end, timedelta(seconds=window_s))


def plan_document(conn: duckdb.DuckDBPyConnection, window: Window) -> dict[str, Any]:
    """`fleetscope plan sharing --format json` over `window`, plus the page's table rows."""
    from analyzers.sharing.plan import plan_sharing
    from analyzers.sharing.render import plan_rows, plan_to_dict
    from analyzers.sharing.usage import gpu_uses

    plan = plan_sharing(gpu_uses(conn, window), window.hours)
    return {**plan_to_dict(plan), "rows": plan_rows(plan)}


def read_stored(engine: Engine, window_s: float) -> StoredPlan | None:
    """The stored sharing plan over windows of `window_s`; None when there is none, or the catalog
    predates the table and was not opened by a process that creates it (`catalog.connect`)."""
    import sqlalchemy

    from warehouse.catalog.plans import newest_plan

    try:
        with engine.connect() as conn:
            return newest_plan(conn, KIND, window_s)
    except sqlalchemy.exc.DBAPIError:  # no stored_plans table yet: nothing stored
        return None


def shown_for(
    stored: StoredPlan | None, end: datetime, length: timedelta, step: PlanStep
) -> StoredPlan | None:
    """The stored plan when it answers the page's window of `length` ending at `end` (the rule in
    the module docstring), else None (the page computes)."""
    if stored is None or abs(stored.window_s - length.total_seconds()) > 1e-6:
        return None
    if not end - step.tolerance <= stored.window_end <= end:
        return None
    return stored


def due(engine: Engine, end: datetime, step: PlanStep) -> bool:
    """Whether the pass whose data ends at `end` stores a new plan."""
    return step.days > 0 and renewal_due(read_stored(engine, step.window_s), end, step)


def renewal_due(stored: StoredPlan | None, end: datetime, step: PlanStep) -> bool:
    """Whether a stored document (a plan, the fleet percentiles) is renewed by the pass whose
    data ends at `end`: none stored, or the newest ends `every_s` or more before `end`."""
    return stored is None or stored.window_end <= end - timedelta(seconds=step.every_s)


def store_plan(
    engine: Engine, conn: duckdb.DuckDBPyConnection, window: Window, window_s: float
) -> bool:
    """Compute the plan of `window` (asked for as `window_s` seconds) and store it; False when a
    plan of a later window is stored."""
    from warehouse.catalog.plans import record_plan

    document = plan_document(conn, window)
    with engine.begin() as catalog:
        return record_plan(catalog, KIND, window_s, window.start, window.end, document)


def store_due_plan(
    engine: Engine,
    connect: Callable[[datetime, datetime], duckdb.DuckDBPyConnection],
    end: datetime,
    step: PlanStep,
) -> Window | None:
    """The scheduled pass's sharing step: when a plan is due (`due`) up to `end` capped just past
    the newest sample (a stalled warehouse's plan is not computed again), compute and store the
    plan of the `step.days` before it; the window stored, or None. `connect(start, end)` opens
    telemetry holding at least that range. A failure is logged and stores nothing: the page then
    computes, as before."""
    if not due(engine, end, step):
        return None
    window = plan_window(end, step.window_s)
    try:
        conn = connect(window.start, window.end)
        try:
            capped = capped_window(conn, end, step, lambda end: due(engine, end, step))
            return capped if capped and store_plan(engine, conn, capped, step.window_s) else None
        finally:
            conn.close()
    except Exception:
        log.exception("sharing plan up to %s not stored", end.isoformat())
        return None


def capped_window(
    telemetry: duckdb.DuckDBPyConnection,
    end: datetime,
    step: PlanStep,
    is_due: Callable[[datetime], bool],
) -> Window | None:
    """The window a due step stores (a plan, the fleet percentiles): the `step.days` before `end`
    capped just past the newest sample, so a stalled warehouse's document is not computed again;
    None when there is no sample or the capped end is not due."""
    from analyzers.accounting.usage import latest_sample

    newest = latest_sample(telemetry)
    if newest is None:
        return None
    end = min(end, newest + timedelta(milliseconds=1))
    return plan_window(end, step.window_s) if is_due(end) else None
