"""Fleet mode: analyzers as Celery tasks on Redis (or any Celery broker), beat scheduling windows.

    celery -A analyzers.run.celery_app worker      one or more, on any machine that reads the warehouse
    celery -A analyzers.run.celery_app beat        exactly one (design.md: beat must run once)

Beat fires `fleetscope.tick` every `scheduler.interval_s`. The tick aligns the wall clock down to
the interval (the schedule time: a late or repeated tick computes the same windows, never
`now()`), and for every partition enqueues `fleetscope.analyze_window` for each window the
partition owes since its watermark, and for every bucket that received data since the partition
last analysed it, whatever its age (analyzers.run.schedule: arrival-driven). A window task reads
the warehouse's segments (`warehouse.read.reader.connect`) and runs the pipeline on its partition; in
fleet mode (`server.mode = fleet`) it cuts the window per cluster holding data for it and sends
one task per cluster, each reading only its (day, cluster) partitions of the Iceberg tables the
gateways commit to, landed together by a chord's body (analyzers.run.fleet_window; the gateways
record arrival marks in the same catalog). Either way findings land in the catalog by their
stable ids, then the partition's watermark advances. Tasks
are acknowledged late and rejected when their worker dies (`task_acks_late`,
`task_reject_on_worker_lost`), so a crashed worker's window is delivered again and re-run; the re-run replaces, never duplicates.

After slice 0 of a window lands (either mode), `fleetscope.sharing_plan` stores the fleet's
sharing plan when one is due (analyzers.sharing.stored), for the Sharing page to read, and
`fleetscope.fleet_percentiles` the fleet percentiles (analyzers.quantiles.stored), for the Fleet
page's.

Settings are read once per worker process from the environment and `fleetscope.toml`, like every
other fleetscope process. This module must never run analyzers in the beat process.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING, Any

from celery import Celery
from celery.schedules import crontab

from fleetscope.errors import ConfigError
from fleetscope.settings import Settings, load_settings

if TYPE_CHECKING:
    import duckdb

    from analyzers.run.results import FindingStore
    from analyzers.run.runner import Pipeline
    from analyzers.run.window import Window
    from warehouse.fleet.tables import FleetTables

log = logging.getLogger(__name__)


def make_app(settings: Settings) -> Celery:
    broker = settings.celery.broker_url
    backend = broker if broker.startswith(("redis://", "rediss://")) else None
    celery = Celery(
        "fleetscope",
        broker=broker,
        backend=backend,
        include=["analyzers.run.fleet"],
    )
    celery.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_expires=3600,
        timezone="UTC",
        enable_utc=True,
        broker_connection_retry_on_startup=True,
        beat_schedule={
            "fleetscope-analyzer-tick": {
                "task": "fleetscope.tick",
                "schedule": settings.scheduler.interval_s,
            },
            # Monday 06:00 UTC, when the ISO week just ended has all its late samples.
            "fleetscope-weekly-reports": {
                "task": "fleetscope.weekly_reports",
                "schedule": crontab(minute=0, hour=6, day_of_week=1),
            },
        },
    )
    if settings.server.mode == "fleet":
        celery.conf.beat_schedule["fleetscope-fleet-upkeep"] = {
            "task": "fleetscope.fleet_upkeep",
            "schedule": 3600.0,
        }
    return celery


@cache
def _settings() -> Settings:
    return load_settings()


app = make_app(_settings())


@cache
def _pipeline() -> Pipeline:
    from analyzers.run.runner import Pipeline

    return Pipeline.from_settings(_settings())


@cache
def _store() -> FindingStore:
    from analyzers.run.results import FindingStore
    from warehouse import catalog
    from warehouse.storage.paths import WarehousePaths

    return FindingStore(catalog.connect(WarehousePaths.from_settings(_settings()).catalog_url))


def _embedded_telemetry(settings: Settings, _window: Window) -> duckdb.DuckDBPyConnection:
    from warehouse.read.reader import connect

    return connect(settings)


@cache
def fleet_tables() -> FleetTables:
    """This worker's handle on the fleet's Iceberg tables (fleet mode), opened once."""
    from warehouse.fleet.tables import FleetConfig, FleetTables

    return FleetTables(FleetConfig.from_settings(_settings()))


# Where a window task reads telemetry in one read: the embedded server's published segments. In
# fleet mode no task reads a whole window: it is cut per cluster (analyzers.run.fleet_window).
# Everything else about a window (the schedule, the arrival marks it covers, where findings
# land, their ids) is the same.
TELEMETRY: dict[str, Callable[[Settings, Window], duckdb.DuckDBPyConnection]] = {
    "embedded": _embedded_telemetry,
}


def window_slices(settings: Settings) -> int:
    """Hash slices per window: `analyzers.partitions` in embedded mode, one in fleet mode. There a
    window is cut per cluster (the clusters are the parallelism) and each part reads its
    cluster's rows whole before a slice keeps its jobs, so four slices read every cluster four
    times."""
    return 1 if settings.server.mode == "fleet" else settings.analyzers.partitions


# At most one run per owed bucket in flight: beat ticks every scheduler.interval_s and re-sent an
# owed bucket at every tick until it landed; on a loaded machine a run takes longer than that, and
# while data streams in each tick sees a newer arrival mark, so the queue filled with runs of one
# bucket (the fleet end-to-end test: 100 window tasks queued, the run for the newest mark behind
# them all). A tick now sends an owed bucket only when no run of it is in flight (a Redis key on
# the result backend, set when sent, deleted when it lands); the next tick then sends it for the
# newest mark. A run lost with its worker is sent again after IN_FLIGHT_S.
IN_FLIGHT_S = 300


def _in_flight_key(partition: int, partitions: int, bucket_start: datetime) -> str:
    return f"fleetscope:in-flight:{partition}/{partitions}/{bucket_start.isoformat()}"


def _redis() -> Any:
    client = getattr(app.backend, "client", None)
    return client if client is not None and hasattr(client, "set") else None


def _take_flight(key: str) -> bool:
    """Whether no run of this bucket is in flight (and now this one is); True without a Redis
    result backend or when Redis does not answer (a second run is harmless, only wasted)."""
    client = _redis()
    if client is None:
        return True
    try:
        return bool(client.set(key, "1", nx=True, ex=IN_FLIGHT_S))
    except Exception:
        return True


def _landed(window: Window) -> None:
    client = _redis()
    if client is not None:
        try:
            client.delete(_in_flight_key(window.partition, window.partitions, window.start))
        except Exception:  # the key expires anyway
            log.warning("could not clear the in-flight mark of %s", window.key())


@app.task(name="fleetscope.tick")  # type: ignore[untyped-decorator]
def tick(schedule_iso: str | None = None) -> list[list[Any]]:
    """Enqueue every window every partition owes at the schedule time; returns what it sent."""
    from analyzers.run.schedule import due_windows, reopen_bound_s, schedule_time

    settings = _settings()
    interval_s = settings.scheduler.interval_s
    now = datetime.fromisoformat(schedule_iso) if schedule_iso else datetime.now(UTC)
    at = schedule_time(now, interval_s)
    partitions = window_slices(settings)
    sent = []
    for p in range(partitions):
        for due in due_windows(
            _store(),
            at,
            bucket_s=settings.analyzers.bucket_s,
            lateness_s=settings.analyzers.lateness_s,
            interval_s=interval_s,
            reopen_max_age_s=reopen_bound_s(settings),
            partition=p,
            partitions=partitions,
        ):
            w = due.window
            args: list[Any] = [w.start.isoformat(), w.end.isoformat(), p, partitions]
            if due.arrival_at is not None:
                if not _take_flight(_in_flight_key(p, partitions, w.start)):
                    continue  # a run of this bucket is in flight: the next tick sends it again
                args.append(due.arrival_at.isoformat())
            analyze_window.apply_async(args=args)
            sent.append(args)
    return sent


# A window's tasks retry a failure (a worker killed, the catalog briefly gone) with backoff; a
# window that still fails is sent again by the next tick, since its watermark did not move.
RETRIED: dict[str, Any] = {"autoretry_for": (Exception,), "retry_backoff": True, "max_retries": 3}


@app.task(name="fleetscope.analyze_window", **RETRIED)  # type: ignore[untyped-decorator]
def analyze_window(
    start_iso: str,
    end_iso: str,
    partition: int,
    partitions: int,
    arrival_iso: str | None = None,
) -> dict[str, Any]:
    """Run the pipeline on one window and partition; land findings; advance the watermark and,
    for a window arrival owed, record the arrival mark it covered (analyzers.run.schedule)."""
    from analyzers.run.results import CatalogJobs
    from analyzers.run.runner import AnalyzerFailedError
    from analyzers.run.schedule import Due, finish_due
    from analyzers.run.window import Window

    window = Window(
        datetime.fromisoformat(start_iso), datetime.fromisoformat(end_iso), partition, partitions
    )
    settings = _settings()
    if settings.server.mode == "fleet":  # one task per cluster, landed together
        return _fan_out(window, arrival_iso)
    store = _store()
    conn = TELEMETRY[settings.server.mode](settings, window)
    try:
        result = _pipeline().run(conn, window, CatalogJobs(store.engine), store)
    finally:
        conn.close()
    if result.errors:
        raise AnalyzerFailedError(f"{window.key()}: {result.errors}")
    arrival = datetime.fromisoformat(arrival_iso) if arrival_iso else None
    finish_due(store, Due(window, arrival))
    if arrival is not None:
        _landed(window)
    _send_sharing_plan(window)
    _send_percentiles(window)
    return {
        "window": window.key(),
        "findings": len(result.findings),
        "seconds": round(sum(result.seconds.values()), 3),
    }


def require_result_backend(celery: Celery) -> None:
    """A chord's body gets its parts' answers through the result backend, which this app has only
    with a Redis broker (`make_app`): a window cut per cluster cannot land without one."""
    from celery.backends.base import DisabledBackend

    if isinstance(celery.backend, DisabledBackend):
        raise ConfigError(
            "fleet mode lands a window's per-cluster parts with a Celery chord, which needs a "
            f"result backend: set celery.broker_url to a redis:// URL, not {celery.conf.broker_url!r}"
        )


def _fan_out(window: Window, arrival_iso: str | None) -> dict[str, Any]:
    """Fleet mode: a chord of one `analyze_window_part` per cluster with data for the window,
    whose body `land_window` lands them together (no data: the empty window lands at once)."""
    from celery import chord

    from analyzers.run.fleet_window import plan_parts

    require_result_backend(app)
    args = [window.start.isoformat(), window.end.isoformat(), window.partition, window.partitions]
    planned = plan_parts(fleet_tables(), _pipeline(), window)
    if not planned:  # landing nothing drops the window's stale open findings, as a read would
        return {"window": window.key(), "parts": [], "landed": land_window([], *args, arrival_iso)}
    parts = [analyze_window_part.s(*args, cluster, whole) for cluster, whole in planned]
    landing = chord(parts)(land_window.s(*args, arrival_iso))
    return {"window": window.key(), "parts": planned, "landing": landing.id}


@app.task(name="fleetscope.analyze_window_part", **RETRIED)  # type: ignore[untyped-decorator]
def analyze_window_part(
    start_iso: str,
    end_iso: str,
    partition: int,
    partitions: int,
    cluster: str | None,
    whole: bool = False,
) -> dict[str, Any]:
    """Fleet mode: one cluster's part of a window, read alone and analysed, not landed."""
    from analyzers.run.fleet_window import analyze_part
    from analyzers.run.results import CatalogJobs
    from analyzers.run.window import Window

    window = Window(
        datetime.fromisoformat(start_iso), datetime.fromisoformat(end_iso), partition, partitions
    )
    jobs = CatalogJobs(_store().engine)
    return analyze_part(fleet_tables(), _pipeline(), jobs, window, cluster, whole)


@app.task(name="fleetscope.land_window", **RETRIED)  # type: ignore[untyped-decorator]
def land_window(
    answers: list[dict[str, Any]],
    start_iso: str,
    end_iso: str,
    partition: int,
    partitions: int,
    arrival_iso: str | None = None,
) -> dict[str, Any]:
    """Fleet mode: the chord's body, landing every part of one window (analyzers.run.fleet_window)."""
    from analyzers.run.fleet_window import land
    from analyzers.run.results import CatalogJobs
    from analyzers.run.window import Window

    window = Window(
        datetime.fromisoformat(start_iso), datetime.fromisoformat(end_iso), partition, partitions
    )
    store = _store()
    arrival = datetime.fromisoformat(arrival_iso) if arrival_iso else None
    landed = land(_pipeline(), store, CatalogJobs(store.engine), answers, window, arrival)
    if arrival is not None:
        _landed(window)
    _send_sharing_plan(window)
    _send_percentiles(window)
    return landed


def _send_sharing_plan(window: Window) -> None:
    """After slice 0 of a window landed: send the sharing step when a plan is due (one catalog
    read; the plan itself, seconds to minutes on a large fleet, runs as its own task). It never
    fails the window, which has landed: the next window sends it again."""
    from analyzers.sharing.stored import PlanStep, due

    step = PlanStep.from_settings(_settings())
    try:
        if window.partition == 0 and due(_store().engine, window.end, step):
            sharing_plan.apply_async(args=[window.end.isoformat()])
    except Exception:
        log.exception("sharing step after %s not sent", window.key())


@app.task(name="fleetscope.sharing_plan")  # type: ignore[untyped-decorator]
def sharing_plan(end_iso: str) -> list[str] | None:
    """The pass's sharing step (analyzers.sharing.stored): the plan of the `analyzers.sharing_days`
    before `end_iso`, read in either mode as `fleetscope plan sharing` reads it, stored in the
    catalog for the Sharing page; the window stored, or None (not due, or nothing to plan)."""
    from analyzers.sharing.stored import PlanStep, store_due_plan
    from warehouse.read.window_reader import open_window

    settings = _settings()
    step = PlanStep.from_settings(settings)
    end = datetime.fromisoformat(end_iso)
    stored = store_due_plan(_store().engine, lambda s, e: open_window(settings, s, e), end, step)
    return [stored.start.isoformat(), stored.end.isoformat()] if stored else None


def _send_percentiles(window: Window) -> None:
    """After slice 0 of a window landed: send the fleet-percentiles step when due (one catalog
    read), as the sharing step is sent; it never fails the window."""
    from analyzers.quantiles.stored import due, step_of

    try:
        if window.partition == 0 and due(_store().engine, window.end, step_of(_settings())):
            fleet_percentiles.apply_async(args=[window.end.isoformat()])
    except Exception:
        log.exception("percentiles step after %s not sent", window.key())


@app.task(name="fleetscope.fleet_percentiles")  # type: ignore[untyped-decorator]
def fleet_percentiles(end_iso: str) -> list[str] | None:
    """The pass's fleet-percentiles step (analyzers.quantiles.stored) up to `end_iso`, from the
    fleet's sketch store, stored in the catalog for the Fleet page; the window stored, or None."""
    from analyzers.quantiles.store import open_store
    from analyzers.quantiles.stored import step_of, store_due_percentiles
    from warehouse.read.window_reader import open_window

    settings = _settings()
    end = datetime.fromisoformat(end_iso)
    stored = store_due_percentiles(
        _store().engine,
        open_store(settings),
        lambda s, e: open_window(settings, s, e),
        end,
        step_of(settings),
    )
    return [stored.start.isoformat(), stored.end.isoformat()] if stored else None


@app.task(name="fleetscope.weekly_reports", acks_late=True)  # type: ignore[untyped-decorator]
def weekly_reports() -> str | None:
    """Beat's weekly job: the last complete week's reports (mailed once, whatever retries)."""
    from analyzers.reports.scheduled import WeeklyReports

    week = WeeklyReports(_settings()).check()
    return str(week) if week else None
