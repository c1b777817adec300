"""The scheduled analyzer pass's fleet-percentiles step (analyzers.quantiles.stored) on a warehouse,
timed: what the pass pays once per `analyzers.percentiles_every_s` so that the Fleet page reads
stored percentiles instead of merging the sketches on open.

    .venv/bin/python -m bench.percentiles_step --week DIR     # bench.fresh_week's folder (DIR/var,
                                                             # DIR/segments, DIR/sketches; the
                                                             # catalog is written)
    .venv/bin/python -m bench.percentiles_step --data-dir DIR # any warehouse (core.data_dir)

It runs the step as the embedded scheduler and `fleetscope analyze` do after their windows land
(`analyzers.run.schedule.store_percentiles`), with the pass's data end at now: the percentiles of
the last `analyzers.percentiles_days` to just past the newest sample, stored in the catalog.
Prints one JSON line: wall and CPU seconds, the 1-minute load before and after, the window stored
and its values. Percentiles already stored within the step are not merged again (`--force` drops
the stored ones first).
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime

from bench.sharing_step import warehouse_args


def main() -> None:
    args = warehouse_args(__doc__.split("\n\n")[0], "percentiles")

    from analyzers.quantiles.stored import KIND, read_stored, step_of
    from analyzers.run.results import FindingStore
    from analyzers.run.runner import WindowResult
    from analyzers.run.schedule import store_percentiles
    from analyzers.run.window import Window
    from fleetscope.settings import load_settings
    from warehouse import catalog
    from warehouse.catalog.plans import stored_plans
    from warehouse.read.reader import connect
    from warehouse.storage.paths import WarehousePaths

    settings = load_settings()
    engine = catalog.connect(WarehousePaths.from_settings(settings).catalog_url)
    step = step_of(settings)
    if args.force:
        with engine.begin() as conn:
            conn.execute(stored_plans.delete().where(stored_plans.c.kind == KIND))
    now = datetime.now(UTC)
    landed = [WindowResult(Window(now.replace(hour=0, minute=0, second=0, microsecond=0), now))]
    load_before = os.getloadavg()[0]
    wall, cpu = time.perf_counter(), time.process_time()
    window = store_percentiles(
        FindingStore(engine), settings, lambda _s, _e: connect(settings), landed
    )
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    stored = read_stored(engine, step.window_s)
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
                "document": stored.document if stored else None,
            }
        )
    )


if __name__ == "__main__":
    main()
