"""Analysis windows from the schedule time, and the embedded scheduler.

Windows never come from `now()` (design.md): a tick's schedule time is the wall clock aligned down
to `scheduler.interval_s`, so a late or repeated tick computes the same window from the same
arrival marks. A window runs from its identity bucket's start (`analyzers.bucket_s`, UTC-aligned) to the schedule time minus
`analyzers.lateness_s` (samples still in flight); a run later in the same bucket re-analyzes the
bucket so far and replaces the earlier findings. Each partition keeps a watermark (where its last
window ended); a tick first finishes every bucket between the watermark and now (catch-up after
downtime), so no bucket is skipped. `backfill` re-runs whole buckets of a past range, but none
whose raw samples retention retired (analyzers.run.backfill).

The embedded scheduler's live window does not wait out the lateness when its data is there
(issue 31; Celery's ticks keep the lateness bound): it ends just
past the newest sample that every cluster still reporting (a commit within `analyzers.lateness_s`
of the tick) has delivered, per the arrival marks, capped at the tick. The lateness is then only
how long a silent cluster may hold the window back; a sample that arrives after its window ran
re-opens its bucket like any late arrival, and the re-run replaces the findings. So a rule's
finding is stored within one `scheduler.interval_s` plus one run of its condition's sample
arriving, not after lateness plus an interval. Quantile panes are kept only up to the lateness
bound (`Window.settled_end`): a pane behind the sketch store's mark is never rebuilt for a
straggler.

Arrival drives the rest (issue 13): the writer records, per bucket, when rows for it were last
committed (warehouse.storage.arrival_hook), and each partition records which arrival mark it analysed. A tick
also runs every bucket whose arrival mark is newer than its partition's, whatever the bucket's
age: a replayed spool, `import prometheus` of history or old remote_write samples get findings
within one interval, with no backfill by hand; a late sample re-opens its bucket and the re-run
replaces findings by their stable ids. Buckets that start more than `analyzers.reopen_max_age_s`
before the tick are not re-opened: they are marked skipped once, logged, and listed by
`fleetscope analyzers --skipped` and the server's `fleetscope_analyzer_buckets_skipped` gauge.

The embedded scheduler is one daemon thread in the server process (no broker): see
`start_embedded`. After its windows land it stores the fleet's sharing plan when one is due
(`store_sharing_plan`, analyzers.sharing.stored). This module must never compute findings itself.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from analyzers.run.clock import align_down
from analyzers.run.window import Window
from fleetscope.errors import ConfigError

if TYPE_CHECKING:
    import duckdb
    from sqlalchemy import Engine

    from analyzers.run.results import FindingStore
    from analyzers.run.runner import Pipeline, WindowResult
    from analyzers.sharing.stored import PlanStep
    from fleetscope.settings import Settings

log = logging.getLogger(__name__)

WATERMARK_KEY = "pipeline"  # one watermark per partition for the whole analyzer pipeline
# Windows are half-open [start, end): the newest delivered sample (millisecond marks) is inside.
ARRIVED_SLACK = timedelta(milliseconds=1)


def schedule_time(now: datetime, interval_s: float) -> datetime:
    """The tick a wall-clock instant belongs to: every instant in one interval gives the same."""
    return align_down(now, interval_s)


def data_end(tick: datetime, lateness_s: float, interval_s: float) -> datetime:
    """Where a tick's data ends: the tick minus the lateness allowance, on the interval grid."""
    return align_down(tick - timedelta(seconds=lateness_s), interval_s)


def live_end(
    tick: datetime,
    lateness_end: datetime,
    arrived_through: datetime | None,
    watermark: datetime | None,
) -> datetime:
    """Where the live window ends: just past the newest sample every reporting cluster has
    delivered (the arrival marks), never before the lateness bound nor the partition's watermark
    (a run never covers less than the last), never past the tick (issue 31: R1 and R3 within two
    minutes of their condition; the lateness bound alone made it 2-3 minutes at defaults)."""
    end = lateness_end
    if arrived_through is not None:
        end = max(end, arrived_through + ARRIVED_SLACK)
    if watermark is not None:
        end = max(end, watermark)
    return min(end, tick)


def buckets(start: datetime, end: datetime, bucket_s: float) -> Iterator[tuple[datetime, datetime]]:
    """The identity buckets [b, b + bucket) that overlap [start, end)."""
    b = align_down(start, bucket_s)
    step = timedelta(seconds=bucket_s)
    while b < end:
        yield b, b + step
        b += step


def pending_windows(
    watermark: datetime | None,
    end: datetime,
    bucket_s: float,
    *,
    partition: int = 0,
    partitions: int = 1,
    first_start: datetime | None = None,
) -> list[Window]:
    """Windows a partition still owes up to `end`: the rest of each bucket from the watermark,
    each starting at its bucket's start (so a re-run replaces findings of the whole bucket)."""
    begin = watermark or first_start or align_down(end - timedelta(microseconds=1), bucket_s)
    out = []
    for b_start, b_end in buckets(begin, end, bucket_s):
        w_end = min(b_end, end)
        if watermark is not None and w_end <= watermark:
            continue
        if w_end > b_start:
            out.append(Window(b_start, w_end, partition, partitions))
    return out


def backfill_windows(
    start: datetime, end: datetime, bucket_s: float, partitions: int = 1
) -> list[Window]:
    """Every bucket overlapping [start, end), whole (capped at `end`), for every partition."""
    if end <= start:
        raise ConfigError(f"backfill range is empty: {start} .. {end}")
    return [
        Window(b_start, min(b_end, max(end, b_start + timedelta(seconds=1))), p, partitions)
        for b_start, b_end in buckets(start, end, bucket_s)
        for p in range(partitions)
    ]


@dataclass(frozen=True)
class Due:
    """A window to run and, when arrival owed it, the arrival mark it covers."""

    window: Window
    arrival_at: datetime | None = None


def reopen_bound_s(settings: Settings) -> float:
    """How old a bucket's data may be for its late arrival to re-open the bucket (0: no bound):
    `analyzers.reopen_max_age_s`, and never past raw retention (`warehouse.raw_retention_days`).
    A day whose raw samples retention retired holds only the late rows: analysing them alone
    would replace the day's findings with theirs (roll-ups merge late rows; findings cannot)."""
    bounds = (
        settings.analyzers.reopen_max_age_s,
        settings.warehouse.raw_retention_days * 86400.0,
    )
    return min((b for b in bounds if b > 0), default=0.0)


def due_windows(
    store: FindingStore,
    tick: datetime,
    *,
    bucket_s: float,
    lateness_s: float,
    interval_s: float,
    reopen_max_age_s: float,
    partition: int = 0,
    partitions: int = 1,
    live: bool = False,
) -> list[Due]:
    """The clock's pending windows plus every bucket that received data since last analysed.

    `live` (the embedded scheduler): the windows reach the data the arrival marks say has arrived
    (`live_end`), their `settled_end` at the lateness bound; Celery's ticks keep the lateness bound
    (its window tasks carry no settled end).

    A bucket older than `reopen_max_age_s` (its start before tick minus the bound) is marked
    skipped and logged instead; a bucket whose data lies wholly after the tick's data end waits.
    """
    key = f"{partition}/{partitions}"
    watermark = store.watermark(WATERMARK_KEY, key)
    settled = data_end(tick, lateness_s, interval_s)
    end = settled
    if live:
        since = tick - timedelta(seconds=lateness_s)
        end = live_end(tick, settled, store.arrived_through(since), watermark)
    clock = pending_windows(
        watermark,
        end,
        bucket_s,
        partition=partition,
        partitions=partitions,
    )
    owed = {o.bucket_start: o for o in store.owed(key)}
    if end > settled:
        clock = [replace(w, settled_end=settled) if w.end > settled else w for w in clock]
    due = [Due(w, owed[w.start].arrival_at if w.start in owed else None) for w in clock]
    taken = {w.start for w in clock}
    oldest = tick - timedelta(seconds=reopen_max_age_s) if reopen_max_age_s > 0 else None
    for bucket_start, o in sorted(owed.items()):
        if bucket_start in taken or bucket_start >= end:
            continue
        if oldest is not None and bucket_start + timedelta(seconds=bucket_s) <= oldest:
            log.warning(
                "late data for bucket %s (clusters %s) not re-analysed: older than %s s "
                "(analyzers.reopen_max_age_s, at most warehouse.raw_retention_days); "
                "`fleetscope backfill` analyses it while its raw samples are kept",
                bucket_start.isoformat(),
                ",".join(o.clusters) or "-",
                reopen_max_age_s,
            )
            store.mark_bucket(key, bucket_start, o.arrival_at, "skipped")
            continue
        w_end = min(bucket_start + timedelta(seconds=bucket_s), end)
        late = Window(bucket_start, w_end, partition, partitions)
        if w_end > settled:
            late = replace(late, settled_end=settled)
        due.append(Due(late, o.arrival_at))
    return due


def finish_due(store: FindingStore, due: Due) -> None:
    """After a successful run: advance the clock watermark and record the arrival mark covered."""
    w = due.window
    key = f"{w.partition}/{w.partitions}"
    store.advance_watermark(WATERMARK_KEY, key, w.end)
    if due.arrival_at is not None:
        store.mark_bucket(key, w.start, due.arrival_at, "analysed")


class TelemetrySource(Protocol):
    """What the embedded scheduler needs from the server: a DuckDB cursor and the catalog."""

    catalog: Engine

    def cursor(self) -> duckdb.DuckDBPyConnection: ...


def run_due(
    pipeline: Pipeline,
    store: FindingStore,
    connect: Callable[[], duckdb.DuckDBPyConnection],
    tick: datetime,
    *,
    bucket_s: float,
    lateness_s: float,
    interval_s: float,
    reopen_max_age_s: float = 0.0,
    partition: int = 0,
    partitions: int = 1,
    live: bool = False,
) -> list[WindowResult]:
    """Run every window a partition owes at `tick` (clock and arrival), recording each done."""
    from analyzers.run.results import CatalogJobs

    results = []
    for due in due_windows(
        store,
        tick,
        bucket_s=bucket_s,
        lateness_s=lateness_s,
        interval_s=interval_s,
        reopen_max_age_s=reopen_max_age_s,
        partition=partition,
        partitions=partitions,
        live=live,
    ):
        conn = connect()
        try:
            result = pipeline.run(conn, due.window, CatalogJobs(store.engine), store)
        finally:
            conn.close()
        results.append(result)
        if not result.errors:
            finish_due(store, due)
    return results


def store_sharing_plan(
    store: FindingStore,
    connect: Callable[[datetime, datetime], duckdb.DuckDBPyConnection],
    results: list[WindowResult],
    step: PlanStep,
) -> Window | None:
    """The pass's sharing step after its windows landed (analyzers.sharing.stored): the plan up
    to the newest window end that landed without errors, when one is due."""
    from analyzers.sharing.stored import store_due_plan

    end = _landed_end(results)
    return store_due_plan(store.engine, connect, end, step) if end else None


def store_percentiles(
    store: FindingStore,
    settings: Settings,
    connect: Callable[[datetime, datetime], duckdb.DuckDBPyConnection],
    results: list[WindowResult],
) -> Window | None:
    """The pass's fleet-percentiles step after its windows landed (analyzers.quantiles.stored):
    the percentiles up to the newest window end that landed without errors, when due."""
    from analyzers.quantiles.store import open_store
    from analyzers.quantiles.stored import step_of, store_due_percentiles

    end = _landed_end(results)
    if end is None:
        return None
    step = step_of(settings)
    return store_due_percentiles(store.engine, open_store(settings), connect, end, step)


def _landed_end(results: list[WindowResult]) -> datetime | None:
    """The newest end of a slice-0 window that landed without errors: the stored steps' data end
    (a slice's own window says nothing of the whole fleet)."""
    ends = [r.window.end for r in results if not r.errors and r.window.partition == 0]
    return max(ends, default=None)


def start_embedded(
    settings: Settings, warehouse: TelemetrySource, *, clock: Callable[[], datetime] | None = None
) -> Callable[[], None]:
    """Start the in-process scheduler thread; returns the function that stops it (and waits)."""
    from analyzers.run.results import FindingStore
    from analyzers.run.runner import Pipeline
    from analyzers.sharing.stored import PlanStep

    interval_s = settings.scheduler.interval_s
    pipeline = Pipeline.from_settings(settings)
    store = FindingStore(warehouse.catalog)
    plan_step = PlanStep.from_settings(settings)
    now = clock or (lambda: datetime.now(UTC))
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            tick = schedule_time(now(), interval_s)
            try:
                results = run_due(
                    pipeline,
                    store,
                    warehouse.cursor,
                    tick,
                    bucket_s=settings.analyzers.bucket_s,
                    lateness_s=settings.analyzers.lateness_s,
                    interval_s=interval_s,
                    reopen_max_age_s=reopen_bound_s(settings),
                    live=True,
                )
                store_sharing_plan(store, lambda _s, _e: warehouse.cursor(), results, plan_step)
                store_percentiles(store, settings, lambda _s, _e: warehouse.cursor(), results)
            except Exception:
                log.exception("embedded analyzer tick %s failed", tick.isoformat())
            next_tick = tick + timedelta(seconds=interval_s)
            stop.wait(max(0.0, (next_tick - now()).total_seconds()))

    thread = threading.Thread(target=loop, name="fleetscope-analyzers", daemon=True)
    thread.start()

    def stopper() -> None:
        stop.set()
        thread.join(timeout=60)

    return stopper
