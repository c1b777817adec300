"""10,000 GPUs in virtual time: the storage step alone, fleetscope's segment writer against
Prometheus's backfill, same samples, same run. CPU seconds and bytes on disk per stored value.

    .venv/bin/python -m bench.virtual_prometheus [--gpus 10000] [--minutes 120] [--interval 60]

What is virtual (nothing scrapes, nothing is served; a live 10,000-GPU fleet does not fit this
machine): the samples are the dashboard's synthetic fleet (`simulator.maker.jobs.gpu_table`,
`gpus / 8` hosts, `minutes` of samples every `interval` s), generated in memory before any timer.
- ours: the rows as the ingest writer publishes them, one slice per `--slice` seconds of every
  host's samples in time order, written through `warehouse.storage.segments.SegmentStore` (Parquet
  segments + manifest) and published: CPU = this process's `time.process_time()` around it;
  stored values = the non-null values of gpu_samples' value columns.
- Prometheus: the same rows' `gpu_util` and `power_w` as OpenMetrics (written before the timer),
  backfilled by `promtool tsdb create-blocks-from openmetrics`: CPU = the child's user + system;
  stored values = the lines. promtool parses text, which our writer does not do (its input is
  Arrow), so its CPU per value includes parsing; the bytes are its compacted TSDB block.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.prometheus_peer import PROMTOOL, dir_bytes
from bench.trace_command import write_section

SECTION = "## 10,000 GPUs in virtual time: segment writer against Prometheus's backfill (issue 19)"
START = datetime(2026, 11, 16, tzinfo=UTC)  # on a 2 h block boundary
PROM_COLUMNS = {"gpu_util": "DCGM_FI_DEV_GPU_UTIL", "power_w": "DCGM_FI_DEV_POWER_USAGE"}


def run(gpus: int, minutes: int, interval_s: int, slice_s: int) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.compute as pc

    from fleetscope.contract import VALUE_COLUMNS
    from simulator.maker.jobs import Fleet, gpu_table, random_jobs
    from warehouse.storage.segments import Segment, SegmentStore

    hosts = max(1, gpus // 8)
    clusters = {"east": tuple(f"east-{i:04d}" for i in range(hosts))}
    duration_s = minutes * 60
    fleet = Fleet(
        clusters=clusters,
        gpus_per_host=8,
        start=START,
        duration_s=duration_s,
        interval_s=interval_s,
        jobs=random_jobs(clusters, 8, duration_s, seed=7),
        noise=0.05,
        seed=7,
    )
    samples = duration_s // interval_s
    step = max(1, slice_s // interval_s)
    slices = [
        pa.concat_tables(
            gpu_table(fleet, h, lo, min(samples, lo + step)) for h in clusters["east"]
        ).sort_by([("ts", "ascending"), ("host", "ascending")])
        for lo in range(0, samples, step)
    ]
    values = sum(
        t.num_rows - t.column(c).null_count
        for t in slices
        for c in VALUE_COLUMNS["gpu_samples"]
        if c in t.column_names
    )
    out: dict[str, Any] = {"gpus": hosts * 8, "minutes": minutes, "interval_s": interval_s}
    out["rows"] = sum(t.num_rows for t in slices)
    out["ours_values"] = values
    with tempfile.TemporaryDirectory(prefix="bench-virtual-prom-") as tmp:
        om = Path(tmp) / "samples.om"
        lines = 0
        with om.open("w") as f:
            for column, metric in PROM_COLUMNS.items():
                f.write(f"# TYPE {metric} gauge\n")
                for host in clusters["east"]:
                    t = gpu_table(fleet, host, 0, samples)
                    ts = (pc.cast(t.column("ts"), pa.int64()).to_numpy() / 1e6).tolist()
                    gpu, job = t.column("gpu_index").to_pylist(), t.column("job_id").to_pylist()
                    vals = t.column(column).to_pylist()
                    for g, j, v, s in zip(gpu, job, vals, ts, strict=True):
                        if v is None:
                            continue
                        f.write(
                            f'{metric}{{Hostname="{host}",gpu="{g}",hpc_job="{j or ""}"}} {v} {s}\n'
                        )
                        lines += 1
            f.write("# EOF\n")
        out["prom_values"] = lines
        out["load_before"] = os.getloadavg()[0]
        # ours: segments as the writer publishes them
        store = SegmentStore(Path(tmp) / "segments")
        c0 = time.process_time()
        published: dict[str, list[Segment]] = {"gpu_samples": []}
        for seq, table in enumerate(slices, start=1):
            name = store.new_name("gpu_samples", START.strftime("%Y-%m-%d"), seq)
            published["gpu_samples"].append(store.write_file(name, table))
        store.publish(len(slices), published)
        out["ours_cpu_s"] = time.process_time() - c0
        out["ours_bytes"] = dir_bytes(Path(tmp) / "segments")
        # Prometheus: backfill the same samples
        blocks = Path(tmp) / "prom"
        blocks.mkdir()
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(
            [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(om), str(blocks)],
            check=True,
            capture_output=True,
        )
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        out["prom_cpu_s"] = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        out["prom_bytes"] = dir_bytes(blocks)
        out["load_after"] = os.getloadavg()[0]
    out["ours_us"] = 1e6 * out["ours_cpu_s"] / out["ours_values"]
    out["prom_us"] = 1e6 * out["prom_cpu_s"] / out["prom_values"]
    out["ours_b"] = out["ours_bytes"] / out["ours_values"]
    out["prom_b"] = out["prom_bytes"] / out["prom_values"]
    return out


def render(r: dict[str, Any], command: str) -> str:
    return "\n".join(
        [
            SECTION,
            "",
            f"Command: `{command}`. {r['gpus']:,} GPUs, {r['minutes']} minutes at one sample per "
            f"{r['interval_s']} s: {r['rows']:,} gpu_samples rows. What is virtual and what each "
            "side does: this module's docstring (bench/virtual_prometheus.py). Load "
            f"{r['load_before']:.1f} / {r['load_after']:.1f}.",
            "",
            "| side | stored values | CPU s | CPU us per value | bytes on disk | bytes per value |",
            "|---|---:|---:|---:|---:|---:|",
            f"| fleetscope segment writer (all value columns) | {r['ours_values']:,} | "
            f"{r['ours_cpu_s']:.2f} | {r['ours_us']:.3f} | {r['ours_bytes']:,} | "
            f"{r['ours_b']:.2f} |",
            f"| promtool backfill (gpu_util, power_w) | {r['prom_values']:,} | "
            f"{r['prom_cpu_s']:.2f} | {r['prom_us']:.3f} | {r['prom_bytes']:,} | "
            f"{r['prom_b']:.2f} |",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=10_000)
    parser.add_argument("--minutes", type=int, default=120)
    parser.add_argument("--interval", type=int, default=60)
    parser.add_argument("--slice", type=int, default=600, help="seconds of samples per segment")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--quick", action="store_true", help="1,000 GPUs, 30 minutes, no write")
    args = parser.parse_args(argv)
    if args.quick:
        args.gpus, args.minutes, args.no_write = 1000, 30, True
    r = run(args.gpus, args.minutes, args.interval, args.slice)
    text = render(
        r,
        f"python -m bench.virtual_prometheus --gpus {args.gpus} --minutes {args.minutes} "
        f"--interval {args.interval} --slice {args.slice}",
    )
    print(text)
    if not args.no_write:
        write_section(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
