"""Sketch keeping (`analyzers.quantiles.tiers.QuantileStore.keep`): every slice built (the code
before, kept as `filled_slices` answering every slice) against only the slices that hold rows,
same data, same run, alternating, with the default tier retentions (10 s: 6 h, 1 min: 1 day,
1 h: 400 days). Both sides build one slice per build (`store_rows.BATCH_VALUES` 0), as when this
bench was written; `bench.keep_batches` measures several slices in one build.

    .venv/bin/python -m bench.keep_slices [--repeats 3]

Scenarios:
  gappy   the backfill test's fleet: 3 GPUs and a host, 3 hours of samples on each of two days;
          two day windows kept, then the same two again (a backfill re-run: rebuilds)
  full    8 GPUs sampled every 10 s for 24 h, one day window (no empty slice: the cost of the
          extra query)

Prints one markdown table for bench/RESULTS.md ("Sketch keeping: empty slices skipped").
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from analyzers.base import JobInfo, StaticJobCatalog
from analyzers.quantiles import store_rows
from analyzers.quantiles.store_rows import Span, slice_seconds
from analyzers.quantiles.tiers import QuantileStore
from analyzers.run.window import Window
from simulator.maker.series import T0, Fleet

RETENTION = {10: 6 * 3600.0, 60: 86400.0, 3600: 400 * 86400.0}
CATALOG = StaticJobCatalog([JobInfo("a", team="t"), JobInfo("b", team="t")])
DAY = timedelta(days=1)
IDLE: dict[str, Any] = {"gpu_util": 0.0, "gr_engine_active": 0.0, "sm_active": 0.0}


def every_slice(_conn: object, _window: Window, res: int, todo: Span) -> dict[int, dict[str, int]]:
    return {int(at.timestamp()) // slice_seconds(res): {"": 1} for at, _stop in todo.slices(res)}


def gappy() -> tuple[Fleet, list[Window]]:
    fleet = Fleet().gpus("a", "h1", range(2), 0, 180, **IDLE).host("h1", 0, 180)
    fleet.gpus("b", "h1", range(2), 1440, 180, **IDLE).host("h1", 1440, 180)
    fleet.gpus("c", "h2", range(1), 1440, 120, **IDLE).host("h2", 1440, 120)
    days = [Window(T0, T0 + DAY), Window(T0 + DAY, T0 + 2 * DAY)]
    return fleet, days + days


def full() -> tuple[Fleet, list[Window]]:
    fleet = Fleet().gpus("a", "h1", range(8), 0, 1440, gpu_util=lambda i, t: float(i % 101))
    return fleet.host("h1", 0, 1440, job="a"), [Window(T0, T0 + DAY)]


def keep_all(fleet: Fleet, windows: list[Window], old: bool) -> tuple[float, int]:
    """Seconds spent in `keep` over the windows, and the bucket rows kept, in a fresh store."""
    saved = store_rows.filled_slices
    cap = store_rows.BATCH_VALUES
    store_rows.BATCH_VALUES = 0
    if old:
        store_rows.filled_slices = every_slice
    try:
        with tempfile.TemporaryDirectory() as tmp:
            store = QuantileStore(Path(tmp), retention_s=RETENTION)
            conn = fleet.connect()
            spent, rows = 0.0, 0
            for window in windows:
                t0 = time.perf_counter()
                kept = store.keep(conn, window, CATALOG)
                spent += time.perf_counter() - t0
                rows += sum(kept.rows.values())
            conn.close()
            return spent, rows
    finally:
        store_rows.filled_slices = saved
        store_rows.BATCH_VALUES = cap


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    scenarios: dict[str, Callable[[], tuple[Fleet, list[Window]]]] = {
        "gappy": gappy,
        "full": full,
    }
    print(
        "| scenario | windows | every slice (s, median) | slices with rows (s, median) | speedup |"
    )
    print("|---|---|---|---|---|")
    for name, make in scenarios.items():
        fleet, windows = make()
        times: dict[bool, list[float]] = {True: [], False: []}
        rows: dict[bool, int] = {}
        for _ in range(args.repeats):
            for old in (True, False):
                spent, rows[old] = keep_all(fleet, windows, old)
                times[old].append(spent)
        assert rows[True] == rows[False], rows
        before, after = statistics.median(times[True]), statistics.median(times[False])
        print(
            f"| {name} | {len(windows)} | {before:.2f} | {after:.2f} | {before / after:.1f}x |",
            flush=True,
        )


if __name__ == "__main__":
    main()
