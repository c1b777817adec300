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
from datetime import UTC, datetime
from pathlib import Path


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


def main() -> None:
    args = warehouse_args(__doc__.split("\n\n")[0], "plan")

    from analyzers.run.results import FindingStore
    from analyzers.run.runner import WindowResult
    from analyzers.run.schedule import store_sharing_plan
    from analyzers.run.window import Window
    from analyzers.sharing.stored import PlanStep, read_stored
    from fleetscope.settings import load_settings
    from warehouse import catalog
    from warehouse.catalog.plans import stored_plans
    from warehouse.read.reader import connect
    from warehouse.storage.paths import WarehousePaths

    settings = load_settings()
    engine = catalog.connect(WarehousePaths.from_settings(settings).catalog_url)
    step = PlanStep.from_settings(settings)
    if args.force:
        with engine.begin() as conn:
            conn.execute(stored_plans.delete())
    now = datetime.now(UTC)
    landed = [WindowResult(Window(now.replace(hour=0, minute=0, second=0, microsecond=0), now))]
    load_before = os.getloadavg()[0]
    wall, cpu = time.perf_counter(), time.process_time()
    window = store_sharing_plan(
        FindingStore(engine), lambda _s, _e: connect(settings), landed, step
    )
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    stored = read_stored(engine, step.window_s)
    doc = stored.document if stored else {}
    print(
        json.dumps(
            {
                "stored_now": window is not None,
                "seconds": round(wall, 2),
                "cpu_s": round(cpu, 2),
                "load_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
                "window": [stored.window_start.isoformat(), stored.window_end.isoformat()]
                if stored
                else None,
                "candidates": doc.get("candidates"),
                "gpus_freed": doc.get("gpus_freed"),
                "freed_gpu_hours_per_week": round(doc.get("freed_gpu_hours_per_week", 0.0), 1),
                "co_locations": len(doc.get("groups", [])),
            }
        )
    )


if __name__ == "__main__":
    main()
