"""The scheduled analyzer pass's sharing step (analyzers.sharing.stored) on a warehouse, timed: what
the pass pays once per `analyzers.sharing_every_s` so that the Sharing page reads a stored plan.

    .venv/bin/python -m bench.sharing_step --week DIR     # bench.fresh_week's folder (DIR/var,
                                                         # DIR/segments; the catalog is written)
    .venv/bin/python -m bench.sharing_step --data-dir DIR # any warehouse (core.data_dir)

It runs the step as the embedded scheduler and `fleetscope analyze` do after their windows land
(`analyzers.run.schedule.store_sharing_plan`), with the pass's data end at now: the plan of the
last `analyzers.sharing_days` to just past the newest sample, stored in the warehouse's catalog.
Prints one JSON line: wall and CPU seconds, the 1-minute load before and after, the window
stored and the plan's headline. A plan already stored within the step is not computed again
(`--force` drops the stored one first).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

    from analyzers.run.results import FindingStore
    from analyzers.run.runner import WindowResult
    from fleetscope.settings import Settings
    from warehouse.catalog.plans import StoredPlan

    Reader = Callable[[datetime, datetime], duckdb.DuckDBPyConnection]


def warehouse_args(description: str, stored: str) -> argparse.Namespace:
    """--week or --data-dir (and --force, which drops the `stored` document first), the
    warehouse chosen by setting the environment before any fleetscope module reads settings."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--week", type=Path, help="a bench.fresh_week --data folder")
    parser.add_argument("--data-dir", type=Path, help="any warehouse's core.data_dir")
    parser.add_argument("--force", action="store_true", help=f"drop the stored {stored} first")
    args = parser.parse_args()
    if args.week:
        week = args.week.resolve()
        os.environ["FLEETSCOPE_CORE_DATA_DIR"] = str(week / "var")
        os.environ["FLEETSCOPE_WAREHOUSE_SEGMENTS_DIR"] = str(week / "segments")
        os.environ["FLEETSCOPE_ANALYZERS_SKETCHES_DIR"] = str(week / "sketches")
    elif args.data_dir:
        os.environ["FLEETSCOPE_CORE_DATA_DIR"] = str(args.data_dir.resolve())
    else:
        parser.error("--week or --data-dir")
    return args


def timed_step(
    args: argparse.Namespace,
    kind: str,
    window_s: Callable[[Settings], float],
    step: Callable[[FindingStore, Settings, Reader, list[WindowResult]], object],
) -> tuple[object, StoredPlan | None, dict[str, object]]:
    """Run a stored-document step of the pass (`kind` in the catalog's stored_plans) as the
    embedded scheduler does after a window that lands now, timed; `--force` drops that kind's
    documents first (only that kind: the catalog holds the others too). Returns what the step
    returned, the newest stored document over `window_s(settings)`, and the timing fields."""
    from analyzers.run.results import FindingStore
    from analyzers.run.runner import WindowResult
    from analyzers.run.window import Window
    from fleetscope.settings import load_settings
    from warehouse import catalog
    from warehouse.catalog.plans import newest_plan, stored_plans
    from warehouse.read.reader import connect
    from warehouse.storage.paths import WarehousePaths

    settings = load_settings()
    engine = catalog.connect(WarehousePaths.from_settings(settings).catalog_url)
    if args.force:
        with engine.begin() as conn:
            conn.execute(stored_plans.delete().where(stored_plans.c.kind == kind))
    now = datetime.now(UTC)
    landed = [WindowResult(Window(now.replace(hour=0, minute=0, second=0, microsecond=0), now))]
    load_before = os.getloadavg()[0]
    wall, cpu = time.perf_counter(), time.process_time()
    result = step(FindingStore(engine), settings, lambda _s, _e: connect(settings), landed)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    with engine.connect() as conn:
        stored = newest_plan(conn, kind, window_s(settings))
    timing = {
        "stored_now": result is not None,
        "seconds": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "load_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "window": [stored.window_start.isoformat(), stored.window_end.isoformat()]
        if stored
        else None,
    }
    return result, stored, timing


def main() -> None:
    args = warehouse_args(__doc__.split("\n\n")[0], "plan")

    from analyzers.run.schedule import store_sharing_plan
    from analyzers.sharing.stored import KIND, PlanStep

    _, stored, timing = timed_step(
        args,
        KIND,
        lambda settings: PlanStep.from_settings(settings).window_s,
        lambda store, settings, reader, landed: store_sharing_plan(
            store, reader, landed, PlanStep.from_settings(settings)
        ),
    )
    doc = stored.document if stored else {}
    headline = {
        "candidates": doc.get("candidates"),
        "gpus_freed": doc.get("gpus_freed"),
        "freed_gpu_hours_per_week": round(doc.get("freed_gpu_hours_per_week", 0.0), 1),
        "co_locations": len(doc.get("groups", [])),
    }
    print(json.dumps({**timing, **headline}))


if __name__ == "__main__":
    main()
