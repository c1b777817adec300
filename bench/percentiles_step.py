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

from bench.sharing_step import timed_step, warehouse_args


def main() -> None:
    args = warehouse_args(__doc__.split("\n\n")[0], "percentiles")

    from analyzers.quantiles.stored import KIND, step_of
    from analyzers.run.schedule import store_percentiles

    _, stored, timing = timed_step(
        args, KIND, lambda settings: step_of(settings).window_s, store_percentiles
    )
    print(json.dumps({**timing, "document": stored.document if stored else None}))


if __name__ == "__main__":
    main()
