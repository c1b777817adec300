"""A fleet's week readable as it lands (issue 27): D days x G GPUs at 10 s published into the
warehouse the way the writer publishes them, while the server's maintenance thread runs with no
full pass due (no compaction: roll-ups only, `warehouse.storage.maintenance.ROLLUP_EVERY_S`, 30 s); then, with
no maintenance pass, the fleet page's 7-day numbers and the CLI, each in a fresh process, wall
time and peak RSS. The page reads the hourly roll-ups, then the minute roll-ups up to their newest
minute, then at most that minute raw; beside it, the same page with the minute roll-up hidden
(the raw tail from the newest hour on, as before the minute stage).

Peer, same data and run: the same reads with every roll-up hidden, which is what a freshly written
week was before roll-ups followed ingest (they came only from the maintenance pass, after
compaction: the page fell back to the raw samples). That read is stopped at `--cap-gib` of RSS
or `--cap-s` seconds, whichever first (the issue saw it pass 12 GiB without an answer).

One analyzer pass over the week (issue 27: 861 s and 11.1 GiB before), in a fresh process each,
same data, same run: every day bucket analysed as the scheduler and `fleetscope backfill` do
(`Pipeline.from_settings(...).run` on a reader connection), once per `--slice-gpus` value (0:
each day read whole, as before; the default 128: in slices of whole hosts, analyzers.run.slices),
each into its own catalog and sketch store; each prints its findings' count and a digest of them
(GPU-hours to 1e-9 h), which must be equal. Stopped at `--pass-cap-gib` or `--pass-cap-s`.

    .venv/bin/python -m bench.fresh_week                   # 7 days x 1,000 GPUs
    .venv/bin/python -m bench.fresh_week --gpus 128 --days 1
    .venv/bin/python -m bench.fresh_week --data /tmp/week  # keep (or reuse) the warehouse
    .venv/bin/python -m bench.fresh_week --data /tmp/week --step-s 60 --build-only
                                                           # a page-paint set, 6x fewer raw rows
    .venv/bin/python -m bench.fresh_week --gpus 250 --only-pass --slice-gpus 0 128
    .venv/bin/python -m bench.fresh_week --data /tmp/week --slice-gpus  # reads only, no pass

Figures go to bench/RESULTS.md under "A fleet's week readable as it lands (issue 27)".
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ORIGIN = 1_767_571_200  # 2026-01-05T00:00:00Z, as bench.simulator


def generate(root: Path, gpus: int, days: float, step_s: int) -> tuple[int, float, float]:
    """Publish the fleet hour by hour while the maintenance thread follows; returns the rows,
    the seconds publishing took and the seconds the roll-ups needed after the last publish."""
    from simulator.fleet import FleetSpec
    from simulator.sim import FleetSimulator
    from warehouse.storage.maintenance import Maintenance, MaintenanceConfig
    from warehouse.storage.segments import SegmentStore

    sim = FleetSimulator(
        FleetSpec(hosts=math.ceil(gpus / 8), seed=7), origin_s=ORIGIN, horizon_s=int(days * 86400)
    )
    store = SegmentStore(root / "segments")
    # No full pass is ever due: the thread only rolls up what was published (no compaction).
    config = MaintenanceConfig(
        interval_s=10**9, target_bytes=128 * 2**20, grace_s=300, retention_days=10**4
    )
    follower = Maintenance(store, None, config)
    follower.start()
    rows = 0
    began = time.perf_counter()
    try:
        for seq, chunk in enumerate(
            sim.iter_tables(ORIGIN, ORIGIN + int(days * 86400), step_s, chunk_s=3600), start=1
        ):
            store.publish(seq, {n: store.write(n, t, seq) for n, t in chunk.items()})
            rows += chunk["gpu_samples"].num_rows
        published = time.perf_counter()
        while not covered(root / "segments"):
            time.sleep(0.5)
        caught_up = time.perf_counter()
    finally:
        follower.stop()
    return rows, published - began, caught_up - published


def covered(segments: Path) -> bool:
    from warehouse.read.rollups import SOURCE_TABLE, rolled_up
    from warehouse.storage.segments import read_manifest

    manifest = read_manifest(segments)
    days = manifest.by_date(SOURCE_TABLE)
    return all(rolled_up(manifest, day, raw) for day, raw in days.items())


def page(segments: Path, hide_rollups: bool, hide_minutes: bool = False) -> dict[str, object]:
    """What the fleet page computes for its 7-day window (dashboard/views/fleet.py);
    `hide_minutes`: the minute roll-up hidden, so the raw tail starts at the newest hour (the
    read before the tail came from the minute roll-up)."""
    from dashboard import data, source
    from warehouse.read import reader  # noqa: F401  (imported by the page's process long before)
    from warehouse.read.rollups import ROLLUP_TABLES

    began, cpu = time.perf_counter(), time.process_time()
    con = source.connect_segments(segments)
    if hide_rollups:
        for table in ROLLUP_TABLES:
            con.execute(f"CREATE OR REPLACE VIEW {table} AS SELECT * FROM _empty_{table}")
    if hide_minutes:
        con.execute("CREATE OR REPLACE VIEW gpu_samples_1m AS SELECT * FROM _empty_gpu_samples_1m")
    win = data.window_ending(con, timedelta(days=7))
    assert win is not None
    buckets = data.gpu_buckets(con, win, 10.0, max_gap_s=300.0)
    totals = data.fleet_totals(buckets)
    data.gpu_hours_over_time(buckets)
    data.utilization_by(buckets, "cluster")
    jobs = data.job_efficiency(buckets)
    data.host_heatmap(buckets)
    data.utilization_percentiles(buckets)
    return {
        "seconds": round(time.perf_counter() - began, 2),
        "cpu_s": round(time.process_time() - cpu, 2),
        "gpus": totals.gpus,
        "jobs": totals.jobs,
        "allocated_h": round(totals.allocated_h, 1),
        "active_pct": round(totals.active_pct, 2),
        "job_rows": len(jobs),
    }


def analyzer_pass(days: float) -> dict[str, object]:
    """One pass over every day bucket of the week, from the settings the parent set (env)."""
    import hashlib

    from analyzers.base import StaticJobCatalog
    from analyzers.run.results import FindingStore
    from analyzers.run.runner import Pipeline
    from analyzers.run.schedule import backfill_windows
    from fleetscope.settings import load_settings
    from warehouse import catalog
    from warehouse.read.reader import connect
    from warehouse.storage.paths import WarehousePaths

    settings = load_settings()
    store = FindingStore(catalog.connect(WarehousePaths.from_settings(settings).catalog_url))
    pipeline = Pipeline.from_settings(settings)
    start = datetime.fromtimestamp(ORIGIN, UTC)
    end = datetime.fromtimestamp(ORIGIN + days * 86400, UTC)
    began, cpu = time.perf_counter(), time.process_time()
    for window in backfill_windows(start, end, settings.analyzers.bucket_s):
        conn = connect(settings)
        try:
            result = pipeline.run(conn, window, StaticJobCatalog(), store)
        finally:
            conn.close()
        if result.errors:
            raise SystemExit(f"analyzers failed on {window.key()}: {result.errors}")
    found = sorted(
        json.dumps(
            [f.finding_id, f.rule_id, f.job_id, f.host, round(f.wasted_gpu_hours, 9), f.evidence],
            sort_keys=True,
        )
        for f in (s.finding for s in store.findings())
    )
    return {
        "slice_gpus": pipeline.slice_gpus,
        "seconds": round(time.perf_counter() - began, 1),
        "cpu_s": round(time.process_time() - cpu, 1),
        "findings": len(found),
        "digest": hashlib.sha256("\n".join(found).encode()).hexdigest()[:16],
    }


def measured(command: list[str], env: dict[str, str], cap_gib: float, cap_s: float) -> str:
    """Run `command`, sampling its RSS; stop it past either cap. One line: wall, peak, result."""
    import resource

    import psutil

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    watched = psutil.Process(proc.pid)
    peak, stopped = 0, ""
    while proc.poll() is None:
        try:
            peak = max(peak, watched.memory_info().rss)
        except psutil.NoSuchProcess:
            break
        elapsed = time.perf_counter() - began
        if peak > cap_gib * 2**30 or elapsed > cap_s:
            stopped = f"STOPPED at {peak / 2**30:.1f} GiB after {elapsed:.0f} s, no answer"
            proc.kill()
            break
        time.sleep(0.05)
    out = proc.communicate()[0].decode(errors="replace").strip().splitlines()
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    tail = stopped or (out[-1] if out else "")
    return f"{wall:6.1f} s wall, {cpu:5.1f} s CPU, peak RSS {peak / 2**20:6.0f} MiB | {tail[:140]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=1000)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--data", type=Path, help="warehouse folder to write (or reuse)")
    parser.add_argument(
        "--step-s", type=int, default=10, help="sample interval (the roll-ups hold the same rows)"
    )
    parser.add_argument(
        "--build-only", action="store_true", help="write the warehouse, measure nothing"
    )
    parser.add_argument("--cap-gib", type=float, default=4.0, help="stop a read past this RSS")
    parser.add_argument("--cap-s", type=float, default=120.0, help="stop a read past this")
    parser.add_argument(
        "--slice-gpus",
        type=int,
        nargs="*",
        default=[0, 128],
        help="analyzer passes to run (none: reads only)",
    )
    parser.add_argument("--pass-cap-gib", type=float, default=8.0, help="stop a pass past this")
    parser.add_argument("--pass-cap-s", type=float, default=3600.0, help="stop a pass past this")
    parser.add_argument("--only-pass", action="store_true", help="no page or CLI reads")
    parser.add_argument("--page", type=Path, help=argparse.SUPPRESS)  # the measured child
    parser.add_argument("--analyze", action="store_true", help=argparse.SUPPRESS)  # a pass child
    parser.add_argument("--hide-rollups", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--hide-minutes", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.page:
        print(json.dumps(page(args.page, args.hide_rollups, args.hide_minutes)))
        return
    if args.analyze:
        print(json.dumps(analyzer_pass(args.days)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = args.data or Path(tmp)
        if (root / "segments" / "manifest.json").exists():
            print(f"reusing {root}")
        else:
            rows, publish_s, lag_s = generate(root, args.gpus, args.days, args.step_s)
            print(
                f"published {rows:,} gpu_samples rows in {publish_s:.0f} s; roll-ups caught up "
                f"{lag_s:.1f} s after the last publish (no compaction, no maintenance pass)"
            )
        if not args.build_only:
            run(root, args)


def run(root: Path, args: argparse.Namespace) -> None:
    # The CLI reads `core.data_dir` only where it exists (else it asks for a server): the
    # catalog it opens there is the reads' own, empty until analyzers land findings.
    (root / "var").mkdir(exist_ok=True)
    env = {
        **os.environ,
        "FLEETSCOPE_CORE_DATA_DIR": str(root / "var"),
        "FLEETSCOPE_WAREHOUSE_SEGMENTS_DIR": str(root / "segments"),
        "FLEETSCOPE_ANALYZERS_SKETCHES_DIR": str(root / "sketches"),
    }
    end = datetime.fromtimestamp(ORIGIN + args.days * 86400, UTC).isoformat()
    me = [sys.executable, "-m", "bench.fresh_week", "--page", str(root / "segments")]
    cli = [sys.executable, "-m", "app.cli"]
    reads = [
        ("fleet page, 7 days (roll-ups + raw minute)", me),
        ("fleet page, 7 days, raw hour (minute roll-up hidden)", [*me, "--hide-minutes"]),
        ("fleet page, 7 days, roll-ups hidden (before)", [*me, "--hide-rollups"]),
        ("fleetscope opportunities --window 7d", [*cli, "opportunities", "--window", "7d"]),
        ("fleetscope quantiles gpu_util_pct", [*cli, "quantiles", "gpu_util_pct", "--end", end]),
    ]
    for name, command in [] if args.only_pass else reads:
        print(f"{name:54s} {measured(command, env, args.cap_gib, args.cap_s)}", flush=True)
    for n in args.slice_gpus:
        passed = {
            **env,
            "FLEETSCOPE_ANALYZERS_SLICE_GPUS": str(n),
            "FLEETSCOPE_WAREHOUSE_CATALOG_URL": f"sqlite:///{root / f'pass-{n}.sqlite'}",
            "FLEETSCOPE_ANALYZERS_SKETCHES_DIR": str(root / f"sketches-pass-{n}"),
        }
        for stale in (root / f"pass-{n}.sqlite", root / f"sketches-pass-{n}"):
            subprocess.run(["rm", "-rf", str(stale)], check=True)
        command = [sys.executable, "-m", "bench.fresh_week", "--analyze", "--days", str(args.days)]
        name = f"analyzer pass, slice_gpus {n}" + (" (before: whole days)" if n == 0 else "")
        result = measured(command, passed, args.pass_cap_gib, args.pass_cap_s)
        print(f"{name:54s} {result}", flush=True)


if __name__ == "__main__":
    main()
