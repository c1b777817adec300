"""Roll-ups follow ingest (issue 27): right after batches land on a real server, with no
maintenance pass (no compaction, `warehouse.maintenance_interval_s` an hour away), the roll-ups
already hold every sample, and the fleet numbers read from them equal those of the raw samples.

Then the parts' bookkeeping: new segments are added as parts, never rolled up twice; a compaction
that merges rolled and new rows under one sequence makes the day roll up whole again, exactly;
parts past `MAX_PARTS` merge into one file with the same rows.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from analyzers.accounting.usage import _rollup_for as rollup_for
from analyzers.accounting.usage import fleet_totals, gpu_buckets, job_efficiency, rollup_stages
from analyzers.run.window import Window
from fleetscope.settings import Settings
from simulator.maker.jobs import Fleet, Job, gpu_table
from simulator.wire import post_batch
from warehouse.ingest.runtime import Server
from warehouse.read.reader import open_segments
from warehouse.read.rollup_delta import MAX_PARTS
from warehouse.read.rollups import ROLLUP_TABLES, SOURCE_TABLE, rolled_up, update_rollups
from warehouse.storage.compaction import compact
from warehouse.storage.paths import WarehousePaths
from warehouse.storage.segments import SegmentStore

from .conftest import TOKEN

START = datetime(2026, 11, 16, 22, tzinfo=UTC)  # two hours before midnight: two UTC days
HOURS = 3
FLEET = Fleet(
    clusters={"east": ("e1", "e2"), "west": ("w1",)},
    gpus_per_host=2,
    start=START,
    duration_s=HOURS * 3600,
    interval_s=10,
    noise=0.05,
    jobs=(
        Job("long", ("e1",), (0, 1), 0, HOURS * 3600, 0.8, sm_active=0.5),
        Job("short", ("e2",), (1,), 1800, 5400, 0.3),
        Job("west", ("w1",), (0,), 600, HOURS * 3600 - 600, 0.6),
    ),
)
SLICE = 60  # samples per published segment: 10 minutes of one host (12 on the first day)
POSTED = 360  # samples per posted batch: an hour of one host


def _raw_only(root: Path) -> duckdb.DuckDBPyConnection:
    con = open_segments(root)
    for table in ROLLUP_TABLES:
        con.execute(f"CREATE OR REPLACE VIEW {table} AS SELECT * FROM _empty_{table}")
    return con


def _covered(root: Path) -> bool:
    manifest = SegmentStore(root).snapshot()
    days = manifest.by_date(SOURCE_TABLE)
    return bool(days) and all(rolled_up(manifest, day, raw) for day, raw in days.items())


def _wait_covered(root: Path, deadline_s: float = 120.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not _covered(root):
        assert time.monotonic() < deadline, "roll-ups never caught up with ingest"
        time.sleep(0.2)


def _assert_same_numbers(root: Path, window: Window) -> None:
    rolled = gpu_buckets(open_segments(root), window, 10.0)
    raw = gpu_buckets(_raw_only(root), window, 10.0)
    got, want = fleet_totals(rolled), fleet_totals(raw)
    assert (got.gpus, got.jobs) == (want.gpus, want.jobs)
    for name in ("capacity_h", "allocated_h", "active_h", "known_h", "sm_h", "sm_known_h"):
        assert getattr(got, name) == pytest.approx(getattr(want, name), rel=1e-9), name
    columns = ["job_id", "gpus", "allocated_h", "active_pct", "sm_active_pct"]
    pd.testing.assert_frame_equal(
        job_efficiency(rolled)[columns], job_efficiency(raw)[columns], rtol=1e-9
    )


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """conftest.py's settings with the server's roll-up step every second, not every 30 s (the
    default, `warehouse.rollup_interval_s`): the step is the same at any interval, and at 30 s
    the test below spent half a minute waiting for the first one."""
    return settings.with_overrides(warehouse__rollup_interval_s=1.0)


def test_rollups_answer_right_after_ingest_with_no_maintenance_pass(
    settings: Settings, server: Server
) -> None:
    root = WarehousePaths.from_settings(settings).segments_dir
    samples = FLEET.duration_s // FLEET.interval_s
    for first in range(0, samples, POSTED):
        for host in ("e1", "e2", "w1"):
            batch = gpu_table(FLEET, host, first, min(samples, first + POSTED))
            assert post_batch(server.url, "gpu_samples", batch, token=TOKEN).status == 202
    _wait_covered(root)
    manifest = SegmentStore(root).snapshot()
    # Nothing was compacted: the live files are the flushes' own, one per flush and day (the
    # ingest log gathers the posts of a second into one flush, so there are few).
    assert len(manifest.live(SOURCE_TABLE)) >= 2
    end = START + timedelta(hours=HOURS)
    week = Window(end - timedelta(days=7), end, bucket_s=3600)
    con = open_segments(root)
    table, _bucket_s, cutoff = rollup_for(con, week) or ("", 0, 0.0)
    assert table == "gpu_samples_1h"
    assert end.timestamp() - cutoff <= 3600  # at most the newest hour is read raw
    _assert_same_numbers(root, week)
    assert fleet_totals(gpu_buckets(con, week, 10.0)).allocated_h == pytest.approx(
        2 * HOURS + 1.0 + (HOURS - 1 / 3), rel=1e-9
    )


def _publish(store: SegmentStore, first: int, end: int) -> None:
    seq = store.snapshot().published_seq + 1
    for host in ("e1", "e2", "w1"):
        table = gpu_table(FLEET, host, first, end)
        store.publish(seq, {"gpu_samples": store.write("gpu_samples", table, seq)})
        seq += 1


def test_new_segments_are_added_as_parts_and_never_rolled_up_twice(tmp_path: Path) -> None:
    store = SegmentStore(tmp_path)
    samples = FLEET.duration_s // FLEET.interval_s
    _publish(store, 0, SLICE)
    assert update_rollups(store) == 1
    parts = len(store.snapshot().live("gpu_samples_1h"))
    _publish(store, SLICE, 2 * SLICE)
    assert update_rollups(store) == 1
    assert len(store.snapshot().live("gpu_samples_1h")) == parts + 1  # one part added
    assert update_rollups(store) == 0
    for first in range(2 * SLICE, samples, SLICE):
        _publish(store, first, min(samples, first + SLICE))
        update_rollups(store)
    manifest = store.snapshot()
    for table in ROLLUP_TABLES:
        for day, files in manifest.by_date(table).items():
            assert len(files) <= MAX_PARTS, (table, day)
    _assert_same_numbers(tmp_path, Window(START, START + timedelta(hours=HOURS), bucket_s=3600))
    _assert_same_numbers(tmp_path, Window(START, START + timedelta(hours=HOURS), bucket_s=300))
    counts = open_segments(tmp_path).sql(
        "SELECT (SELECT sum(samples) FROM gpu_samples_1m), (SELECT sum(samples) FROM "
        "gpu_samples_1h), (SELECT sum(samples) FROM gpu_jobs_1d), (SELECT count(*) FROM "
        "gpu_samples), (SELECT count(*) FROM gpu_samples WHERE job_id IS NOT NULL)"
    )
    per_minute, per_hour, per_job, raw, allocated = counts.fetchall()[0]
    assert per_minute == per_hour == raw
    assert per_job == allocated


def test_a_compaction_across_the_mark_rolls_the_day_up_whole(tmp_path: Path) -> None:
    store = SegmentStore(tmp_path)
    _publish(store, 0, SLICE)
    assert update_rollups(store) == 1
    _publish(store, SLICE, 2 * SLICE)  # not rolled up yet
    assert compact(store, target_bytes=10**9) >= 1  # rolled and new rows in one file
    manifest = store.snapshot()
    assert not all(
        rolled_up(manifest, day, raw) for day, raw in manifest.by_date(SOURCE_TABLE).items()
    )
    assert update_rollups(store) == 1
    assert len(store.snapshot().by_date("gpu_samples_1h")[START.strftime("%Y-%m-%d")]) == 1
    _assert_same_numbers(tmp_path, Window(START, START + timedelta(hours=1), bucket_s=300))


def test_a_fresh_tail_is_read_from_the_minute_rollup_up_to_its_newest_minute(
    tmp_path: Path,
) -> None:
    """The fleet page's week as it lands: hourly roll-ups up to their newest hour, minute
    roll-ups on to their newest minute, and at most that minute raw, with the numbers of the
    whole raw read (counts exactly, GPU-hours to rounding)."""
    store = SegmentStore(tmp_path)
    published = 950  # samples per host: up to 00:38:10, two UTC days
    for first in range(0, published, SLICE):
        _publish(store, first, min(published, first + SLICE))
    update_rollups(store)
    newest = START + timedelta(seconds=(published - 1) * FLEET.interval_s)
    end = newest + timedelta(milliseconds=1)
    week = Window(end - timedelta(days=7), end, bucket_s=3600)
    week = Window(datetime.fromtimestamp(week.start.timestamp() // 3600 * 3600, UTC), end)
    hour, minute = newest.replace(minute=0, second=0), newest.replace(second=0)
    assert rollup_stages(open_segments(tmp_path), week) == [
        ("gpu_samples_1h", 3600, week.start.timestamp(), hour.timestamp()),
        ("gpu_samples_1m", 60, hour.timestamp(), minute.timestamp()),
    ]
    _assert_same_numbers(tmp_path, week)
    rolled = gpu_buckets(open_segments(tmp_path), week, 10.0)
    raw = gpu_buckets(_raw_only(tmp_path), week, 10.0)
    assert rolled["samples"].sum() == raw["samples"].sum() == 3 * FLEET.gpus_per_host * published
    per_gpu = ["host", "gpu_index"]
    pd.testing.assert_series_equal(
        rolled.groupby(per_gpu)["gpu_h"].sum(), raw.groupby(per_gpu)["gpu_h"].sum(), rtol=1e-12
    )


def test_a_window_that_ends_inside_a_rolled_up_bucket_reads_only_up_to_its_end(
    tmp_path: Path,
) -> None:
    """A past window ending mid-hour and mid-minute: the bucket holding its end is read from
    a finer roll-up or raw, never whole (it holds samples after the end)."""
    store = SegmentStore(tmp_path)
    samples = FLEET.duration_s // FLEET.interval_s
    for first in range(0, samples, SLICE):
        _publish(store, first, min(samples, first + SLICE))
    update_rollups(store)
    end = START + timedelta(hours=2, minutes=20, seconds=25)
    window = Window(START, end, bucket_s=3600)
    assert [stage[3] for stage in rollup_stages(open_segments(tmp_path), window)] == [
        (START + timedelta(hours=2)).timestamp(),
        (START + timedelta(hours=2, minutes=20)).timestamp(),
    ]
    _assert_same_numbers(tmp_path, window)
    rolled = gpu_buckets(open_segments(tmp_path), window, 10.0)
    assert rolled["samples"].sum() == 3 * FLEET.gpus_per_host * (
        int((end - START).total_seconds()) // 10 + 1
    )


def test_a_sample_lost_in_the_raw_minute_moves_no_hosts_interval(tmp_path: Path) -> None:
    """The host's interval scales every rolled row of its week: measured in a one-minute raw
    tail as (last - first) / (samples - 1), one lost sample would make it 12.5 s. The median
    gap between samples is 10 s, and the numbers stay those of the whole raw read."""
    store = SegmentStore(tmp_path)
    published, lost = 954, 950  # the newest minute, 00:38, holds samples 948-953; 950 is lost
    for first in range(0, 900, SLICE):
        _publish(store, first, first + SLICE)
    seq = store.snapshot().published_seq + 1
    lost_at = START + timedelta(seconds=lost * FLEET.interval_s)
    for host in ("e1", "e2", "w1"):
        table = gpu_table(FLEET, host, 900, published)
        table = table.filter(pc.invert(pc.equal(table["ts"], pa.scalar(lost_at, table["ts"].type))))
        store.publish(seq, {"gpu_samples": store.write("gpu_samples", table, seq)})
        seq += 1
    update_rollups(store)
    end = START + timedelta(seconds=(published - 1) * FLEET.interval_s, milliseconds=1)
    week = Window(end - timedelta(days=7), end, bucket_s=3600)
    week = Window(datetime.fromtimestamp(week.start.timestamp() // 3600 * 3600, UTC), end)
    stages = rollup_stages(open_segments(tmp_path), week)
    assert stages[-1][3] == lost_at.replace(second=0).timestamp()  # the lost sample is raw
    rolled = gpu_buckets(open_segments(tmp_path), week, 10.0)
    assert set(rolled["interval_s"]) == {10.0}
    _assert_same_numbers(tmp_path, week)
