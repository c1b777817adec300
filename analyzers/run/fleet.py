"""Fleet mode on Celery: analyzers and upkeep fan out per (day, cluster) partition of Iceberg.

    fleetscope.fleet_analyze_partition(day, cluster)   one worker reads only that partition
        (warehouse.fleet.reader: partition + file-statistics pruning, then DuckDB) and runs the
        pipeline on it; returns its findings and a gpu_util quantile sketch of the partition
    fleetscope.fleet_compact_partition(table, day, cluster)   small-file compaction
    fleetscope.fleet_retention(table)                  raw partitions past warehouse.raw_retention_days
                                                       dropped, roll-ups kept, one at a time
    fleetscope.fleet_expire_snapshots(table)           snapshots older than a day forgotten
    fleetscope.fleet_sweep_orphans(table)              files no snapshot reaches, older than 3 days,
                                                       deleted (warehouse.fleet.orphans); both for
                                                       the contract's tables and gpu_samples_1h
    fleetscope.fleet_prune_ledger()                    batch ids past raw retention plus
                                                       fleet.ledger_margin_days forgotten
    fleetscope.fleet_upkeep()                          hourly from beat in fleet mode: sends the above

Scheduled analysis is the embedded one (analyzers.run.celery_app): beat's `fleetscope.tick` sends
`fleetscope.analyze_window` for the windows the clock and the gateways' arrival marks owe, and in
fleet mode each is cut per cluster and landed together (analyzers.run.fleet_window), so day-old
samples a gateway receives get findings with no backfill.

`merge` joins the partitions' answers: findings are concatenated (a job runs in one cluster, and a
day window is the partition's own, so no finding spans two partitions), sketches merge losslessly
(the merged sketch is byte-identical to one built over all the rows). Workers start as the
embedded analyzers' do (`celery -A analyzers.run.celery_app worker`), from the settings alone.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from analyzers.run.celery_app import _settings, _store, app, fleet_tables

if TYPE_CHECKING:
    from celery import Task

    from analyzers.run.runner import Pipeline
    from analyzers.sketch.core import QuantileSketch
    from warehouse.fleet.tables import FleetTables


def _day(day_iso: str) -> datetime:
    d = date.fromisoformat(day_iso)
    return datetime(d.year, d.month, d.day, tzinfo=UTC)


def analyze_partition_with(
    tables: FleetTables, pipeline: Pipeline, day_iso: str, cluster: str
) -> dict[str, Any]:
    """The work of one partition task, callable without Celery (benchmarks, tests)."""
    from analyzers.base import StaticJobCatalog
    from analyzers.run.fleet_window import gpu_util_sketch
    from analyzers.run.window import Window
    from warehouse.fleet.reader import connect

    start = _day(day_iso)
    window = Window(start, start + timedelta(days=1))
    conn = connect(tables, window.start, window.end, [cluster])
    try:
        # the cluster's panes under the cluster's marks (the scheduled parts' of the same day)
        result = pipeline.run(conn, window, StaticJobCatalog(), cluster=cluster)
        sketch = gpu_util_sketch(conn, window)
        rows = conn.execute("SELECT count(*) FROM gpu_samples").fetchall()[0][0]
    finally:
        conn.close()
    return {
        "partition": [day_iso, cluster],
        "rows": int(rows),
        "errors": result.errors,
        "findings": [f.to_dict() for f in result.findings],
        "gpu_util_sketch": sketch,
    }


@app.task(name="fleetscope.fleet_analyze_partition", acks_late=True)  # type: ignore[untyped-decorator]
def analyze_partition(day_iso: str, cluster: str) -> dict[str, Any]:
    from analyzers.run.runner import Pipeline

    return analyze_partition_with(
        fleet_tables(), Pipeline.from_settings(_settings()), day_iso, cluster
    )


@app.task(name="fleetscope.fleet_compact_partition", acks_late=True)  # type: ignore[untyped-decorator]
def compact_partition(table: str, day_iso: str, cluster: str | None) -> int:
    """Compacts the partition unless retention drops it within a day (a task may run late)."""
    from warehouse.fleet.upkeep import Partition, compact, compaction_allowed

    part = Partition(table, date.fromisoformat(day_iso), cluster)
    days = _settings().warehouse.raw_retention_days
    if not compaction_allowed(part, days, datetime.now(UTC)):
        return 0
    return compact(fleet_tables(), part)


@app.task(name="fleetscope.fleet_retention", acks_late=True)  # type: ignore[untyped-decorator]
def retention(table: str) -> list[str]:
    from warehouse.fleet.upkeep import retention as drop

    days = _settings().warehouse.raw_retention_days
    dropped = drop(fleet_tables(), table, days, datetime.now(UTC))
    return [f"{p.day}/{p.cluster}" for p in dropped]


@app.task(name="fleetscope.fleet_expire_snapshots", acks_late=True)  # type: ignore[untyped-decorator]
def expire(table: str) -> int:
    from warehouse.fleet.upkeep import expire_snapshots

    return expire_snapshots(
        fleet_tables(), table, timedelta(days=1), datetime.now(UTC), _store().engine
    )


@app.task(name="fleetscope.fleet_sweep_orphans", acks_late=True)  # type: ignore[untyped-decorator]
def sweep_orphans(table: str) -> int:
    from warehouse.fleet.orphans import ORPHAN_MIN_AGE, sweep

    found = fleet_tables().existing(table)  # the roll-up table exists after a first retention
    return 0 if found is None else len(sweep(found, ORPHAN_MIN_AGE, datetime.now(UTC)))


@app.task(name="fleetscope.fleet_prune_ledger", acks_late=True)  # type: ignore[untyped-decorator]
def prune_ledger() -> int:
    """Forget batch ids past raw retention plus `fleet.ledger_margin_days` (the PostgreSQL ledger
    would otherwise grow by every batch every gateway ever took)."""
    from warehouse.fleet.upkeep import prune_ledger as prune

    settings = _settings()
    return prune(
        _store().engine,
        settings.warehouse.raw_retention_days,
        settings.fleet.ledger_margin_days,
        datetime.now(UTC),
    )


def compaction_due(
    tables: FleetTables,
    table: str,
    min_files: int = 2,
    raw_retention_days: int | None = None,
    now: datetime | None = None,
) -> list[list[str | None]]:
    """[day, cluster] of every partition of `table` with at least `min_files` data files, but
    none that retention drops within a day (`upkeep.compaction_allowed`; by default
    `warehouse.raw_retention_days` and the clock)."""
    from warehouse.fleet.upkeep import compaction_allowed, file_count, partitions

    days = (
        _settings().warehouse.raw_retention_days
        if raw_retention_days is None
        else raw_retention_days
    )
    at = datetime.now(UTC) if now is None else now
    return [
        [p.day.isoformat(), p.cluster]
        for p in partitions(tables, table)
        if compaction_allowed(p, days, at) and file_count(tables, p) >= min_files
    ]


def upkeep_plan(tables: FleetTables) -> list[tuple[Task, list[str | None]]]:
    """What one upkeep sends, in order: a compaction per partition that needs it, then retention,
    snapshot expiry and the orphan-file sweep per table, then expiry and sweep of the hourly
    roll-up table that retention commits to and of the quantile-sketch table the analyzers'
    parts commit to, then the ledger's pruning (each its own task, so workers spread them; a
    sweep that reads the metadata before its table's expiry keeps what the expiry frees, and the
    next hour's sweep deletes it). Neither derived table needs compaction here: each roll-up
    rewrites its (day, cluster) partition as one file, the sketch store compacts its own."""
    from analyzers.quantiles.fleet_store import TABLE as SKETCHES
    from fleetscope.contract import TABLES
    from warehouse.fleet.rollup import ROLLUP_1H

    days, now = _settings().warehouse.raw_retention_days, datetime.now(UTC)
    plan: list[tuple[Task, list[str | None]]] = []
    for table in TABLES:
        due = compaction_due(tables, table, raw_retention_days=days, now=now)
        plan += [(compact_partition, [table, d, c]) for d, c in due]
        plan += [(retention, [table]), (expire, [table]), (sweep_orphans, [table])]
    for derived in (ROLLUP_1H, SKETCHES):  # committed to by retention, by the analyzers' parts
        plan += [(expire, [derived]), (sweep_orphans, [derived])]
    plan.append((prune_ledger, []))
    return plan


@app.task(name="fleetscope.fleet_upkeep", acks_late=True)  # type: ignore[untyped-decorator]
def upkeep() -> dict[str, int]:
    """Beat's hourly fleet job: sends `upkeep_plan`'s tasks."""
    plan = upkeep_plan(fleet_tables())
    for task, args in plan:
        task.apply_async(args=args)
    return {"compactions": sum(1 for task, _ in plan if task is compact_partition)}


@dataclass
class Merged:
    """The partitions' answers joined: findings, rows read, and the lossless gpu_util sketch."""

    findings: list[dict[str, Any]] = field(default_factory=list)
    rows: int = 0
    errors: dict[str, Any] = field(default_factory=dict)
    gpu_util: QuantileSketch | None = None


def merge(answers: list[dict[str, Any]]) -> Merged:
    from analyzers.sketch.core import QuantileSketch

    out = Merged(gpu_util=QuantileSketch())
    for answer in answers:
        out.findings.extend(answer["findings"])
        out.rows += int(answer["rows"])
        if answer["errors"]:
            out.errors["/".join(answer["partition"])] = answer["errors"]
        part = QuantileSketch.from_bytes(base64.b64decode(answer["gpu_util_sketch"]))
        assert out.gpu_util is not None
        out.gpu_util.merge(part)
    out.findings.sort(key=lambda f: str(f.get("finding_id", "")))
    return out
