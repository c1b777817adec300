"""Dashboard page render times on the benchmark warehouse (7 days x 1,000 GPUs at 10 s).

    .venv/bin/python -m bench.dashboard            # 125 hosts x 8 GPUs x 7 days x 10 s = 60.5 M rows
    .venv/bin/python -m bench.dashboard --quick    # 16 hosts x 8 GPUs x 1 day

The warehouse is written once as real warehouse segments (`simulator.maker.jobs`, through
`warehouse.storage.segments.SegmentStore`) under `var/bench/dashboard-<spec>/` and reused: an hour of
every host's samples per segment, in time order as the ingest writer publishes them, then
compacted and rolled up (every roll-up family) as the server's maintenance leaves it. Each page is
rendered server-side with Streamlit's AppTest: cold (every cache cleared, fresh connection) and
warm (second run within the cache TTL). Target (design.md): every page < 2 s.

Peer, same run: the fleet accounting computed the exact way, one `lead(ts)` window per GPU over
every sample (what per-sample interval accounting costs, as `analyzers.accounting.frames` does), against the
dashboard's aggregate (`data.gpu_buckets`) on the warehouse's roll-ups and on raw samples only,
with the allocated GPU-hours of each printed side by side.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from dashboard import data, source
from fleetscope.settings import load_settings
from simulator.maker.jobs import Fleet, random_jobs, write_segments
from warehouse.read.rollups import update_rollups
from warehouse.storage.compaction import compact
from warehouse.storage.segments import SegmentStore

APP = Path(__file__).parents[1] / "dashboard" / "app.py"
START = datetime(2026, 11, 9, tzinfo=UTC)
# Segments as the ingest writer publishes them: every host's samples of a slice of time (here an
# hour, so generation stays fast), which compaction merges into time-ordered files.
SLICE_S = 3600


def build(hosts: int, days: int, root: Path) -> tuple[Path, Fleet]:
    clusters = {
        name: tuple(f"{name}-{i:03d}" for i in range(hosts) if i % 2 == n)
        for n, name in enumerate(("east", "west"))
    }
    duration_s = days * 86400
    fleet = Fleet(
        clusters=clusters,
        gpus_per_host=8,
        start=START,
        duration_s=duration_s,
        interval_s=10,
        jobs=random_jobs(clusters, 8, duration_s, seed=7),
        noise=0.05,
        seed=7,
    )
    data_dir = root / f"dashboard-{hosts}h-{days}d-{SLICE_S}s"
    marker = data_dir / "complete"
    if not marker.exists():
        began = time.perf_counter()
        rows = write_segments(fleet, data_dir / "segments", rollups=False, slice_s=SLICE_S)
        marker.write_text(str(rows))
        print(f"wrote {rows:,} gpu_samples rows in {time.perf_counter() - began:.0f} s")
    # The warehouse as the server's maintenance leaves it (warehouse.storage.maintenance): small segments
    # compacted per table and day, then every roll-up family; both steps are incremental no-ops
    # on a warehouse already done.
    store = SegmentStore(data_dir / "segments")
    began = time.perf_counter()
    merged = compact(store, load_settings().warehouse.compact_target_bytes)
    store.purge_retired(0.0)
    if merged:
        print(f"compacted into {merged} files in {time.perf_counter() - began:.0f} s")
    began = time.perf_counter()
    days_done = update_rollups(store)
    if days_done:
        print(
            f"rolled up {days_done} days in {time.perf_counter() - began:.0f} s (warehouse.read.rollups)"
        )
    print(f"warehouse: {data_dir} ({int(marker.read_text()):,} gpu_samples rows)")
    return data_dir, fleet


def time_pages(data_dir: Path, repeats: int) -> dict[str, tuple[float, float]]:
    """Median cold and warm render seconds per page (AppTest, server side)."""
    os.environ["FLEETSCOPE_CORE_DATA_DIR"] = str(data_dir)
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    con = source.connect_segments(data_dir / "segments")
    window = data.window_ending(con, timedelta(days=7))
    assert window is not None
    buckets = data.gpu_buckets(con, window, 10.0)
    idlest = data.job_efficiency(buckets)["job_id"].iloc[0]
    pages: dict[str, tuple[str | None, dict[str, str]]] = {
        "fleet": (None, {}),
        "jobs": ("views/jobs.py", {}),
        "job": ("views/job.py", {"job_id": str(idlest)}),
        "hosts": ("views/hosts.py", {}),
    }
    results: dict[str, tuple[float, float]] = {}
    for name, (page, query) in pages.items():
        cold, warm = [], []
        for _ in range(repeats):
            st.cache_data.clear()
            st.cache_resource.clear()
            app = AppTest.from_file(str(APP), default_timeout=120)
            if page is not None:
                app.run()  # navigation must run once before switching pages
                st.cache_data.clear()
                st.cache_resource.clear()
                app.switch_page(page)
                app.query_params.update(query)
            began = time.perf_counter()
            app.run()
            cold.append(time.perf_counter() - began)
            assert not app.exception, app.exception
            began = time.perf_counter()
            app.run()
            warm.append(time.perf_counter() - began)
        results[name] = (statistics.median(cold), statistics.median(warm))
    return results


def peer(data_dir: Path) -> None:
    """Fleet accounting for the 7-day window three ways, timed in the same run."""
    con = source.connect_segments(data_dir / "segments")
    window = data.window_ending(con, timedelta(days=7))
    assert window is not None
    began = time.perf_counter()
    rolled = data.fleet_totals(data.gpu_buckets(con, window, 10.0)).allocated_h
    rolled_s = time.perf_counter() - began
    for table in ("gpu_samples_1h", "gpu_samples_1m"):
        con.execute(f"CREATE OR REPLACE VIEW {table} AS SELECT * FROM _empty_{table}")
    began = time.perf_counter()
    raw = data.fleet_totals(data.gpu_buckets(con, window, 10.0)).allocated_h
    raw_s = time.perf_counter() - began
    began = time.perf_counter()
    rows = con.sql(
        """
        WITH s AS (
            SELECT job_id, epoch_ms(ts) AS t,
                   lead(epoch_ms(ts)) OVER (PARTITION BY host, gpu_index ORDER BY ts) AS next_t
            FROM gpu_samples
        )
        SELECT sum(CASE WHEN next_t - t <= 300000 THEN next_t - t ELSE 10000 END) / 3.6e6
        FROM s WHERE job_id IS NOT NULL
        """
    ).fetchall()
    exact_s = time.perf_counter() - began
    print("fleet accounting over 7 days (allocated GPU-h):")
    print(f"  roll-ups + raw tail (dashboard)  {rolled_s:7.2f} s  {rolled:,.1f}")
    print(f"  one pass over raw samples        {raw_s:7.2f} s  {raw:,.1f}")
    print(f"  peer: per-sample lead() window   {exact_s:7.2f} s  {rows[0][0]:,.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="16 hosts, 1 day")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--root", type=Path, default=Path("var/bench"))
    args = parser.parse_args()
    hosts, days = (16, 1) if args.quick else (125, 7)
    data_dir, _fleet = build(hosts, days, args.root)
    peer(data_dir)
    print(f"{'page':<8} {'cold s':>8} {'warm s':>8}   (median of {args.repeats}, AppTest)")
    for name, (cold, warm) in time_pages(data_dir, args.repeats).items():
        print(f"{name:<8} {cold:>8.2f} {warm:>8.2f}")


if __name__ == "__main__":
    main()
