"""Fleet mode's scheduled windows, cut per cluster: one task per (day, cluster) part, one landing.

The work of the tasks (analyzers.run.celery_app sends and runs them), callable without Celery:

    fleetscope.analyze_window (celery_app)   in fleet mode: lists the clusters holding data for the
        window (Iceberg partition metadata, `warehouse.fleet.reader.clusters`) and sends
    fleetscope.analyze_window_part(window, cluster)   per cluster: reads only that cluster's rows of
        the window (partition + file-statistics pruning: its (day, cluster) partitions), runs the
        analyzers without landing (`Pipeline.run_part`), keeps that cluster's quantile panes;
        answers its findings, a fleet-wide analyzer's partial rows, what its scan read and a
        gpu_util sketch
    fleetscope.land_window(answers, window, arrival)   the chord's body: every part's findings
        landed at once by stable id (`Pipeline.land_parts`: the same ids, the same replace of a
        re-run window as one read), the sketches merged losslessly, then the watermark and
        arrival mark advanced as `analyze_window` does in embedded mode

When `analyzers.bucket_s` divides a day (86400, the default, does), a window lies in one UTC day
and a part reads one (day, cluster) partition per table; otherwise a part reads its cluster's
partitions of each day the window touches. Beat's tick and `backfill --celery` send one hash
slice per window in fleet mode (`celery_app.window_slices`: the clusters are the parallelism, and
`analyzers.partitions` slices would each read every cluster whole); a window sent with several
slices still works: each slice's window is cut per cluster, and within its part each analyzer
keeps its slice's jobs or hosts.

Two landings of one window never leave the older read's findings behind (issue 30: the fleet
end-to-end test saw it under load). Beat ticks every `scheduler.interval_s` and re-sends a window
still owed, so two runs of one bucket can be in flight at once, the later one sent for a newer
arrival mark and reading more rows; landing in the other order, the older run replaced the newer
findings, and the arrival mark (kept as the greatest) said the bucket was done. Landings of a
(slice, bucket) now take a PostgreSQL advisory lock, and a run whose arrival mark is older than
the one already landed is dropped: that landing read every row up to its newer mark.

A part that fails (after its retries) fails the chord: the body does not run, the watermark and
the arrival mark stay, and a tick sends the window again once its in-flight mark expires
(celery_app.IN_FLIGHT_S). This module must never choose
windows (analyzers.run.schedule does).
"""

from __future__ import annotations

import base64
import hashlib
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from analyzers.run.parts import WHOLE, Part, Scope

if TYPE_CHECKING:
    import duckdb
    from sqlalchemy import Engine

    from analyzers.base import JobCatalog
    from analyzers.run.results import FindingStore
    from analyzers.run.runner import Pipeline
    from analyzers.run.window import Window
    from warehouse.fleet.tables import FleetTables

log = logging.getLogger(__name__)


def gpu_util_sketch(conn: duckdb.DuckDBPyConnection, window: Window) -> str:
    """The part's gpu_util quantile sketch over its window (the scan also holds the rules'
    look-back before it), base64 (merges losslessly with the other parts')."""
    import numpy as np

    from analyzers.sketch.core import QuantileSketch

    util = conn.execute(
        "SELECT gpu_util FROM gpu_samples WHERE gpu_util IS NOT NULL AND ts >= ? AND ts < ?",
        [window.start, window.end],
    ).fetchnumpy()
    sketch = QuantileSketch()
    sketch.add(np.asarray(util["gpu_util"], dtype=np.float64))
    return base64.b64encode(sketch.to_bytes()).decode("ascii")


def plan_parts(
    tables: FleetTables, pipeline: Pipeline, window: Window
) -> list[tuple[str | None, bool]]:
    """(cluster, whole) of each part the window needs: one per cluster holding data for it (from
    the Iceberg partition metadata), and one whole part when a fleet-wide analyzer that cannot
    combine parts runs on it."""
    from analyzers.run.runner import part_kind
    from warehouse.fleet.reader import clusters

    parts: list[tuple[str | None, bool]] = [
        (c, False) for c in clusters(tables, window.start, window.end)
    ]
    if any(part_kind(a, window, whole=True) for a in pipeline.analyzers):
        parts.append((None, True))
    return parts


def analyze_part(
    tables: FleetTables,
    pipeline: Pipeline,
    catalog: JobCatalog,
    window: Window,
    cluster: str | None,
    whole: bool = False,
) -> dict[str, Any]:
    """One cluster's part of a window (or, `whole`, every cluster's): read only it, run the
    analyzers, answer without landing, with what each table's scan read."""
    from analyzers.base import lookback_of
    from warehouse.fleet.reader import open_scan

    scope: Scope = WHOLE if whole else cluster
    # The rules' look-back (R3: an idle stretch begun before the bucket) reads the previous day's
    # partition of the cluster too, as the embedded reader's whole table does.
    lookback_s = max(pipeline.params.lookback_s, lookback_of(pipeline.analyzers))
    scan_start = window.start - timedelta(seconds=lookback_s)
    conn, scanned = open_scan(tables, scan_start, window.end, None if whole else [cluster])
    try:
        part = pipeline.run_part(conn, window, catalog, scope)
        sketch = gpu_util_sketch(conn, window)
    finally:
        conn.close()
    return {
        "part": part.to_dict(),
        "scanned": [s.to_dict() for s in scanned],
        "gpu_util_sketch": sketch,
    }


def land(
    pipeline: Pipeline,
    store: FindingStore,
    catalog: JobCatalog,
    answers: Sequence[dict[str, Any]],
    window: Window,
    arrival_at: datetime | None,
) -> dict[str, Any]:
    """Land every part's findings of the window at once; advance its watermark and arrival mark.
    Raises AnalyzerFailedError (nothing advanced) when an analyzer failed in a part."""
    from analyzers.run.runner import AnalyzerFailedError
    from analyzers.run.schedule import Due, finish_due
    from analyzers.sketch.core import QuantileSketch

    parts = [Part.from_dict(a["part"]) for a in answers]
    with landing_lock(store.engine, window):
        slice_key = f"{window.partition}/{window.partitions}"
        landed = store.analysed_through(slice_key, window.start)
        if arrival_at is not None and landed is not None and landed > arrival_at:
            log.info("window %s: a run for a newer arrival mark landed first", window.key())
            return {"window": window.key(), "findings": None, "superseded_by": landed.isoformat()}
        result = pipeline.land_parts(parts, window, catalog, store)
        if result.errors:
            raise AnalyzerFailedError(f"{window.key()}: {result.errors}")
        finish_due(store, Due(window, arrival_at))
    util = QuantileSketch()
    for answer in answers:
        util.merge(QuantileSketch.from_bytes(base64.b64decode(answer["gpu_util_sketch"])))
    return {
        "window": window.key(),
        "findings": len(result.findings),
        "seconds": round(sum(result.seconds.values()), 3),
        "parts": [
            {"cluster": a["part"]["cluster"], "whole": a["part"]["whole"], "scanned": a["scanned"]}
            for a in answers
        ],
        "gpu_util_sketch": base64.b64encode(util.to_bytes()).decode("ascii"),
    }


@contextmanager
def landing_lock(engine: Engine, window: Window) -> Iterator[None]:
    """One landing at a time per (slice, bucket) across every worker: a transaction-level
    PostgreSQL advisory lock (fleet mode's catalog is PostgreSQL), released when the block ends or
    the worker's connection drops."""
    from sqlalchemy import text

    name = f"fleetscope.landing/{window.partition}/{window.partitions}/{window.start.isoformat()}"
    key = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)
    with engine.begin() as conn:
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
        yield
