"""Analyzer throughput: D days x G GPUs at 10 s generated into the warehouse, analyzed embedded
(one process, bucket after bucket) and by 2 Celery worker processes on Redis (buckets x 2
partitions), same data, same run.

    .venv/bin/python -m bench.analyzers [--gpus 1000 --days 7] [--quick]

The data is the simulator's batch mode (simulator), published as warehouse segments the
way the writer publishes them; both modes read it through `warehouse.read.reader` and land findings in
a real SQLite catalog. Celery uses Redis db 14 (flushed). Prints one table; figures go to
bench/RESULTS.md under "Analyzers (issue 5)".
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

BROKER = "redis://127.0.0.1:6379/14"
ORIGIN = 1_740_960_000  # 2025-03-03T00:00:00Z


def generate(root: Path, gpus: int, days: float, step_s: int) -> int:
    from simulator.fleet import FleetSpec
    from simulator.sim import FleetSimulator
    from warehouse.storage.segments import SegmentStore

    sim = FleetSimulator(
        FleetSpec(hosts=math.ceil(gpus / 8), seed=7), origin_s=ORIGIN, horizon_s=int(days * 86400)
    )
    store = SegmentStore(root)
    rows = 0
    for seq, chunk in enumerate(
        sim.iter_tables(ORIGIN, ORIGIN + int(days * 86400), step_s, chunk_s=6 * 3600), start=1
    ):
        store.publish(seq, {n: store.write(n, t, seq) for n, t in chunk.items()})
        rows += chunk["gpu_samples"].num_rows
    return rows


def reused(segments: Path) -> int:
    from warehouse.storage.segments import read_manifest

    return sum(s.rows for s in read_manifest(segments).live("gpu_samples"))


def embedded(settings_env: dict[str, str], days: float) -> tuple[float, int]:
    from analyzers.base import StaticJobCatalog
    from analyzers.run.results import FindingStore
    from analyzers.run.runner import Pipeline
    from analyzers.run.schedule import backfill_windows
    from fleetscope.settings import load_settings
    from warehouse import catalog
    from warehouse.read.reader import connect
    from warehouse.storage.paths import WarehousePaths

    settings = load_settings(env=settings_env)
    store = FindingStore(catalog.connect(WarehousePaths.from_settings(settings).catalog_url))
    pipeline = Pipeline.from_settings(settings)
    start = datetime.fromtimestamp(ORIGIN, UTC)
    end = datetime.fromtimestamp(ORIGIN + days * 86400, UTC)
    began = time.perf_counter()
    findings = 0
    for window in backfill_windows(start, end, settings.analyzers.bucket_s):
        conn = connect(settings)
        try:
            result = pipeline.run(conn, window, StaticJobCatalog(), store)
        finally:
            conn.close()
        if result.errors:
            raise SystemExit(f"analyzers failed: {result.errors}")
        findings += len(result.findings)
    return time.perf_counter() - began, findings


def celery(settings_env: dict[str, str], days: float, log_dir: Path) -> tuple[float, int]:
    import redis

    from analyzers.run.celery_app import make_app
    from analyzers.run.schedule import backfill_windows
    from fleetscope.settings import load_settings

    redis.Redis.from_url(BROKER).flushdb()
    settings = load_settings(env=settings_env)
    logs = [(log_dir / f"worker{i}.log").open("wb") for i in range(2)]
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "analyzers.run.celery_app",
                "worker",
                "--pool",
                "solo",
                "--hostname",
                f"bench{i}@%h",
                "--loglevel",
                "WARNING",
            ],
            env=settings_env,
            stdout=logs[i],
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a group of its own: killed whole on any exit below
        )
        for i in range(2)
    ]
    atexit.register(_kill_groups, workers)  # the finally below is the usual path; this a net
    try:
        app = make_app(settings)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # both workers up before the clock starts
            replies = app.control.ping(timeout=1.0) or []
            if len(replies) >= 2:
                break
        start = datetime.fromtimestamp(ORIGIN, UTC)
        end = datetime.fromtimestamp(ORIGIN + days * 86400, UTC)
        windows = backfill_windows(start, end, settings.analyzers.bucket_s, 2)
        began = time.perf_counter()
        results = [
            app.send_task(
                "fleetscope.analyze_window",
                args=[w.start.isoformat(), w.end.isoformat(), w.partition, w.partitions],
            )
            for w in windows
        ]
        findings = sum(r.get(timeout=3600)["findings"] for r in results)
        return time.perf_counter() - began, findings
    finally:
        _kill_groups(workers)
        for log in logs:
            log.close()


def _kill_groups(workers: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM each worker's process group (a prefork child too), SIGKILL what outlives 60 s."""
    for w in workers:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(w.pid, signal.SIGTERM)
    for w in workers:
        try:
            w.wait(timeout=60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(w.pid, signal.SIGKILL)
            w.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=1000)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--step-s", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="16 GPUs x 1 day")
    parser.add_argument(
        "--data",
        type=Path,
        help="generate the telemetry into this folder once and reuse it on later runs "
        "(generating 1,000 GPUs x 7 days takes minutes); default: a temporary folder",
    )
    args = parser.parse_args()
    # `timeout` sends SIGTERM: exit through the finally blocks so workers and temp files go too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    gpus, days = (16, 1.0) if args.quick else (args.gpus, args.days)
    with tempfile.TemporaryDirectory(prefix="fleetscope-bench-analyzers-") as tmp:
        root = Path(tmp)
        segments = (args.data or root) / "var" / "segments"
        t = time.perf_counter()
        if args.data and (segments / "manifest.json").exists():
            rows = reused(segments)
        else:
            rows = generate(segments, gpus, days, args.step_s)
        gen_s = time.perf_counter() - t
        base = {
            **os.environ,
            "FLEETSCOPE_CORE_DATA_DIR": str(root / "var"),
            "FLEETSCOPE_WAREHOUSE_SEGMENTS_DIR": str(segments),
            "FLEETSCOPE_CELERY_BROKER_URL": BROKER,
        }
        emb_s, emb_n = embedded(
            {
                **base,
                "FLEETSCOPE_WAREHOUSE_CATALOG_URL": f"sqlite:///{root / 'embedded.sqlite'}",
                "FLEETSCOPE_ANALYZERS_SKETCHES_DIR": str(root / "sketches-embedded"),
            },
            days,
        )
        cel_s, cel_n = celery(
            {
                **base,
                "FLEETSCOPE_WAREHOUSE_CATALOG_URL": f"sqlite:///{root / 'celery.sqlite'}",
                "FLEETSCOPE_ANALYZERS_SKETCHES_DIR": str(root / "sketches-celery"),
            },
            days,
            root,
        )
    print(
        f"{gpus} GPUs x {days:g} days at {args.step_s} s: {rows:,} gpu_samples rows "
        f"(generated and published in {gen_s:.1f} s)"
    )
    print(f"{'mode':<24} {'seconds':>9} {'rows/s':>12} {'findings':>9}")
    for name, secs, n in (
        ("embedded (1 process)", emb_s, emb_n),
        ("celery (2 workers)", cel_s, cel_n),
    ):
        print(f"{name:<24} {secs:>9.1f} {rows / secs:>12,.0f} {n:>9}")


if __name__ == "__main__":
    main()
