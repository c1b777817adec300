"""The fleet percentiles the scheduled analyzer pass stores, and which stored percentiles answer the
Fleet page's window (issue 31: merging the week's quantile sketches took 1.1-1.3 s of the fleet
page's first open on 7 days x 1,000 GPUs; a stored document is read in milliseconds).

The step: after a scheduled pass lands a window (the embedded scheduler's tick, `fleetscope
analyze`, Celery's window task), when the newest stored percentiles of `analyzers.percentiles_days`
end `analyzers.percentiles_every_s` or more before the pass's data end, the percentiles over the
days before that end (the page's alignment; capped just past the newest sample, as a page's window
is) are merged from the sketches as `fleetscope quantiles active_pct` merges them (samples of
allocated GPUs) and stored in the catalog (`warehouse.catalog.plans`, kind `fleet_percentiles`).

A page shows them by the Sharing page's rule (`analyzers.sharing.stored.shown_for`): the same
length of time as the sidebar's window, ending at or before its end and at most one step before
it; otherwise it merges the sketches for its window. The page says which it shows.

This module must never choose the pass's windows (analyzers.run.schedule does).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from analyzers.run.window import Window
from analyzers.sharing.stored import PlanStep, capped_window, plan_window, renewal_due

if TYPE_CHECKING:
    import duckdb
    from sqlalchemy import Engine

    from analyzers.quantiles.store import SketchStore
    from fleetscope.settings import Settings
    from warehouse.catalog.plans import StoredPlan

__all__ = [
    "KIND",
    "QUANTILES",
    "document",
    "due",
    "read_stored",
    "step_of",
    "store_due_percentiles",
]

KIND: Final = "fleet_percentiles"
METRIC: Final = "active_pct"  # the Fleet page's table: active % of allocated GPUs' samples
QUANTILES: Final = (0.5, 0.9, 0.99)
log = logging.getLogger(__name__)


def step_of(settings: Settings) -> PlanStep:
    """The percentiles' window and renewal, with the pass's slack (`PlanStep`)."""
    a = settings.analyzers
    slack = a.lateness_s + settings.scheduler.interval_s
    return PlanStep(a.percentiles_days, a.percentiles_every_s, slack)


def document(conn: duckdb.DuckDBPyConnection, window: Window) -> dict[str, Any] | None:
    """`fleetscope quantiles active_pct` over `window` (allocated GPUs) as a document: the
    quantiles, their values and the samples counted; None when no sketch covers the window."""
    from analyzers.quantiles.fleet_percentiles import percentiles

    sketch = percentiles(conn, METRIC, [], window.start, window.end, "allocated").get(())
    if sketch is None or sketch.count == 0:
        return None
    values = [float(v) for v in sketch.quantiles(list(QUANTILES))]
    return {"metric": METRIC, "quantiles": list(QUANTILES), "values": values, "count": sketch.count}


def read_stored(engine: Engine, window_s: float) -> StoredPlan | None:
    """The stored fleet percentiles over windows of `window_s`; None when there are none (or the
    catalog predates the table)."""
    import sqlalchemy

    from warehouse.catalog.plans import newest_plan

    try:
        with engine.connect() as conn:
            return newest_plan(conn, KIND, window_s)
    except sqlalchemy.exc.DBAPIError:
        return None


def due(engine: Engine, end: datetime, step: PlanStep) -> bool:
    """Whether the pass whose data ends at `end` stores new percentiles."""
    return step.days > 0 and renewal_due(read_stored(engine, step.window_s), end, step)


def store_due_percentiles(
    engine: Engine,
    store: SketchStore,
    connect: Callable[[datetime, datetime], duckdb.DuckDBPyConnection],
    end: datetime,
    step: PlanStep,
) -> Window | None:
    """The pass's percentiles step: when due (`due`) up to `end` capped just past the newest
    sample (read through `connect(start, end)`, telemetry holding that range), merge and store
    the percentiles of the `step.days` before it; the window stored, or None. A failure is logged
    and stores nothing: the page then merges on open, as before."""
    from warehouse.catalog.plans import record_plan

    if not due(engine, end, step):
        return None
    window = plan_window(end, step.window_s)
    try:
        telemetry = connect(window.start, window.end)
        try:
            capped = capped_window(telemetry, end, step, lambda end: due(engine, end, step))
        finally:
            telemetry.close()
        if capped is None or not store.has_rows():
            return None
        window = capped
        sketches = store.connect(window.start, window.end)
        try:
            found = document(sketches, window)
        finally:
            sketches.close()
        if found is None:
            return None
        with engine.begin() as catalog:
            stored = record_plan(catalog, KIND, step.window_s, window.start, window.end, found)
        return window if stored else None
    except Exception:
        log.exception("fleet percentiles up to %s not stored", end.isoformat())
        return None
