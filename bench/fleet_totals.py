"""The fleet page's headline two ways on a warehouse: `fleet_totals(gpu_buckets(...))` (every
(bucket, GPU, job) row first) against `analyzers.accounting.totals.window_totals` (per host, GPU
and job), per window the page offers, timed, with the largest relative difference of their totals.

    .venv/bin/python -m bench.fleet_totals --week DIR      # bench.fresh_week's folder
    .venv/bin/python -m bench.fleet_totals --data-dir DIR  # any warehouse (core.data_dir)

Each read runs twice on one connection (the second is printed: the files' metadata read once);
the accounting settings are the warehouse's (`agent.interval_s`, `analyzers.max_gap_s`).
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import astuple
from datetime import timedelta
from pathlib import Path

WINDOWS = {"last hour": timedelta(hours=1), "6 h": timedelta(hours=6),
           "24 h": timedelta(days=1), "7 days": timedelta(days=7)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--week", type=Path, help="a bench.fresh_week --data folder")
    parser.add_argument("--data-dir", type=Path, help="any warehouse's core.data_dir")
    args = parser.parse_args()
    if args.week:
        os.environ["FLEETSCOPE_CORE_DATA_DIR"] = str(args.week.resolve() / "var")
        os.environ["FLEETSCOPE_WAREHOUSE_SEGMENTS_DIR"] = str(args.week.resolve() / "segments")
    elif args.data_dir:
        os.environ["FLEETSCOPE_CORE_DATA_DIR"] = str(args.data_dir.resolve())
    else:
        parser.error("--week or --data-dir")

    from analyzers.accounting.totals import window_totals
    from analyzers.accounting.usage import aligned, fleet_totals, gpu_buckets
    from dashboard.data import latest_sample
    from fleetscope.settings import load_settings
    from warehouse.read.reader import connect

    settings = load_settings()
    interval_s, max_gap_s = settings.agent.interval_s, settings.analyzers.max_gap_s
    con = connect(settings)
    newest = latest_sample(con)
    assert newest is not None, "no samples"
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(
        "| window | buckets + totals s | window_totals s | largest relative difference | GPUs, jobs |"
    )
    print("|---|---:|---:|---:|---|")
    for label, length in WINDOWS.items():
        window = aligned(newest + timedelta(milliseconds=1), length)
        for _ in range(2):
            began = time.perf_counter()
            want = fleet_totals(gpu_buckets(con, window, interval_s, max_gap_s=max_gap_s))
            buckets_s = time.perf_counter() - began
            began = time.perf_counter()
            got = window_totals(con, window, interval_s, max_gap_s=max_gap_s)
            totals_s = time.perf_counter() - began
        worst = max(
            abs(a - b) / abs(a) if a else abs(b)
            for a, b in zip(astuple(want), astuple(got), strict=True)
            if a is not None and b is not None
        )
        same = (got.gpus, got.jobs) == (want.gpus, want.jobs)
        print(
            f"| {label} | {buckets_s:.2f} | {totals_s:.2f} | {worst:.1e} | "
            f"{want.gpus}, {want.jobs}{' both' if same else f' against {got.gpus}, {got.jobs}'} |"
        )
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
