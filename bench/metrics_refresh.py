"""One refresh of the findings and GPU-hours exporter (`analyzers.prometheus_export`): the previous
exporter (a read of the whole metrics window every refresh) against the incremental one (a read of
the hours that can still change), in the same run, over the same warehouse.

    python -m bench.metrics_refresh [--hosts 40] [--gpus-per-host 8] [--rounds 5]

A warehouse of 24 h of `hosts x gpus` GPUs at 10 s (segments and roll-ups, as an embedded server's)
read two ways: `embedded` (views over the segments, as the server's cursor), and `fleet-like`
(the read range copied into an in-memory DuckDB table and nothing else, as the fleet source's scan
lands it; the object store's transfer is not in it). Per exporter: its first refresh (the whole
window for both) and the median of `rounds` refreshes one minute apart after it. The previous
exporter is the module as of `--base` (git), loaded from its source.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import duckdb

ROOT = Path(__file__).resolve().parent.parent
BASE = "98e5406"  # the last commit with the whole-window exporter
START = datetime(2026, 11, 16, 0, tzinfo=UTC)
DAY_S = 86_400


def previous_exporter(base: str) -> ModuleType:
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{base}:analyzers/prometheus_export.py"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    spec = importlib.util.spec_from_loader("previous_prometheus_export", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    exec(compile(source, f"{base}:analyzers/prometheus_export.py", "exec"), module.__dict__)
    return module


def build(root: Path, hosts: int, gpus_per_host: int) -> int:
    from simulator.maker.jobs import Fleet, random_jobs, write_segments

    clusters = {"c1": tuple(f"h{i:03d}" for i in range(hosts))}
    jobs = random_jobs(clusters, gpus_per_host, DAY_S, seed=3)
    fleet = Fleet(clusters, gpus_per_host, START, DAY_S, 10, jobs=jobs, noise=0.05)
    return write_segments(fleet, root)


def embedded(root: Path) -> Callable[[float, float], duckdb.DuckDBPyConnection]:
    from warehouse.read.reader import open_segments

    return lambda _start_s, _end_s: open_segments(root)


def fleet_like(root: Path) -> Callable[[float, float], duckdb.DuckDBPyConnection]:
    from analyzers.prometheus_sources import landed
    from warehouse.read.reader import open_segments

    def connect(start_s: float, end_s: float) -> duckdb.DuckDBPyConnection:
        source = open_segments(root)
        rows = source.sql(
            "SELECT * FROM gpu_samples WHERE ts >= to_timestamp($s) AND ts < to_timestamp($e)",
            params={"s": start_s, "e": end_s},
        ).to_arrow_table()
        source.close()
        return landed(rows)

    return connect


def measure(module: Any, catalog: Any, telemetry: Any, rounds: int) -> tuple[float, float]:
    """Seconds of the first refresh, and the median of `rounds` refreshes a minute apart."""
    # A server's clock is not on a minute: the whole-window read never lines up with a roll-up.
    clock = [START.timestamp() + DAY_S + 0.37]
    exporter = module.FleetCollector(
        catalog, telemetry, window_s=86_400.0, top_jobs=20, refresh_s=60.0, lateness_s=120.0,
        default_interval_s=10.0, max_gap_s=300.0, clock=lambda: clock[0],
    )  # fmt: skip
    took = []
    for _ in range(rounds + 1):
        began = time.perf_counter()
        exporter.refresh()
        took.append(time.perf_counter() - began)
        assert exporter._failures == 0
        clock[0] += 60.0
    return took[0], statistics.median(took[1:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=40)
    parser.add_argument("--gpus-per-host", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--base", default=BASE)
    args = parser.parse_args(argv)

    import analyzers.prometheus_export as current
    from warehouse import catalog

    previous = previous_exporter(args.base)
    with tempfile.TemporaryDirectory() as tmp:
        began = time.perf_counter()
        rows = build(Path(tmp) / "warehouse", args.hosts, args.gpus_per_host)
        print(f"warehouse: {rows:,} gpu_samples rows ({args.hosts * args.gpus_per_host} GPUs, "
              f"24 h at 10 s) in {time.perf_counter() - began:.1f} s")  # fmt: skip
        engine = catalog.connect(f"sqlite:///{Path(tmp) / 'catalog.sqlite'}")
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
              f"{os.cpu_count()} CPUs (shared machine)")  # fmt: skip
        print("| telemetry | exporter | first refresh (s) | later refresh, median (s) |")
        print("|---|---|---|---|")
        for name, source in (("embedded", embedded), ("fleet-like", fleet_like)):
            for label, module in (("whole window", previous), ("incremental", current)):
                first, later = measure(module, engine, source(Path(tmp) / "warehouse"), args.rounds)
                print(f"| {name} | {label} | {first:.2f} | {later:.2f} |", flush=True)
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
