"""Simulator batch generation vs the live path, in the same run.

Batch: `FleetSimulator.iter_tables` writing the three tables to Parquet (zstd) for D days x G GPUs
at S-second samples (full run: 7 days x 1,000 GPUs x 10 s, the fleet-query benchmark's data).
Peer: the live path an agent fleet takes for the same rows: render every host's page and parse
it with prometheus_client's reference parser, timed on a slice and reported per row.

    .venv/bin/python -m bench.simulator            # 7 days x 1,000 GPUs x 10 s
    .venv/bin/python -m bench.simulator --quick    # 1 day x 128 GPUs x 10 s
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
from prometheus_client.parser import text_string_to_metric_families

from fleetscope.contract import TABLES
from simulator.fleet import FleetSpec
from simulator.sim import FleetSimulator

START = 1_767_571_200  # 2026-01-05T00:00:00Z


def batch(
    sim: FleetSimulator, t0: int, t1: int, step_s: int, out: Path
) -> tuple[int, float, float]:
    began, cpu = time.perf_counter(), time.process_time()
    writers = {
        name: pq.ParquetWriter(out / f"{name}.parquet", schema, compression="zstd")
        for name, schema in TABLES.items()
    }
    gpu_rows = 0
    for chunk in sim.iter_tables(t0, t1, step_s):
        for name, table in chunk.items():
            writers[name].write_table(table)
        gpu_rows += chunk["gpu_samples"].num_rows
    for writer in writers.values():
        writer.close()
    return gpu_rows, time.perf_counter() - began, time.process_time() - cpu


def live(sim: FleetSimulator, t0: int, scrapes: int, step_s: int) -> tuple[int, float, float]:
    began, cpu = time.perf_counter(), time.process_time()
    rows = 0
    for k in range(scrapes):
        for host in sim.hosts:
            page = sim.page(host, t0 + k * step_s)
            gpus = {
                (s.labels["gpu"], s.labels.get("GPU_I_ID"))
                for family in text_string_to_metric_families(page)
                for s in family.samples
            }
            rows += len(gpus)
    return rows, time.perf_counter() - began, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    days, gpus, step_s = (1.0, 128, 10) if args.quick else (7.0, 1000, 10)
    t1 = START + int(days * 86_400)
    began = time.perf_counter()
    sim = FleetSimulator(
        FleetSpec(hosts=math.ceil(gpus / 8), seed=7), origin_s=START, horizon_s=t1 - START
    )
    plan_s = time.perf_counter() - began
    with tempfile.TemporaryDirectory() as tmp:
        rows, batch_s, batch_cpu = batch(sim, START, t1, step_s, Path(tmp))
        size = sum(p.stat().st_size for p in Path(tmp).iterdir())
    live_rows, live_s, live_cpu = live(sim, START, 3, step_s)
    print(
        f"fleet: {len(sim.hosts)} hosts, {len(sim.fleet.units)} GPUs/MIG slices, "
        f"{len(sim.fleet.jobs)} jobs planned in {plan_s:.1f} s"
    )
    print(
        f"batch: {rows:,} gpu_samples rows (+ host and step tables) in {batch_s:.1f} s wall, "
        f"{batch_cpu:.1f} s CPU = {rows / batch_cpu:,.0f} gpu rows per CPU-second, "
        f"Parquet {size / 2**20:.0f} MiB"
    )
    print(
        f"live peer (render + prometheus_client parse): {live_rows:,} rows in {live_s:.2f} s "
        f"wall, {live_cpu:.2f} s CPU = {live_rows / live_cpu:,.0f} gpu rows per CPU-second"
    )
    print(f"batch / live (CPU): {(rows / batch_cpu) / (live_rows / live_cpu):.0f}x")


if __name__ == "__main__":
    main()
