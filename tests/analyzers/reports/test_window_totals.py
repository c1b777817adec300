"""The fleet page's headline, read per (host, GPU, job) (`analyzers.accounting.totals`), is the
buckets' totals: `fleet_totals(gpu_buckets(...))` of the same window, whatever the warehouse holds.

Counts equal exactly, GPU-hours to 1e-12 (the same sums added in another order). The warehouses:
roll-ups published in parts (a bucket split over several rows), a fresh tail read from the minute
roll-up and raw samples, a window ending inside a rolled-up hour, raw samples only with an agent
outage, a host whose interval the raw tail measures after a lost sample, and an empty one.
"""

from __future__ import annotations

from dataclasses import astuple
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from analyzers.accounting.totals import window_totals
from analyzers.accounting.usage import fleet_totals, gpu_buckets, rollup_stages
from analyzers.run.window import Window
from simulator.maker.jobs import Fleet, Job, gpu_table, write_segments
from tests.warehouse.test_rollups_follow_ingest import FLEET, SLICE, START, _publish, _raw_only
from warehouse.read.reader import open_segments
from warehouse.read.rollups import update_rollups
from warehouse.storage.segments import SegmentStore


def _assert_buckets_totals(con: duckdb.DuckDBPyConnection, window: Window) -> None:
    got = window_totals(con, window, 10.0, max_gap_s=300.0)
    want = fleet_totals(gpu_buckets(con, window, 10.0, max_gap_s=300.0))
    assert (got.gpus, got.jobs) == (want.gpus, want.jobs)
    assert astuple(got) == pytest.approx(astuple(want), rel=1e-12, abs=0.0)


def _week_to(end: datetime) -> Window:
    start = (end - timedelta(days=7)).timestamp() // 3600 * 3600
    return Window(datetime.fromtimestamp(start, UTC), end, bucket_s=3600)


def test_roll_ups_published_in_parts(tmp_path: Path) -> None:
    store = SegmentStore(tmp_path)
    for first in range(0, FLEET.duration_s // FLEET.interval_s, SLICE):
        _publish(store, first, first + SLICE)
        update_rollups(store)  # each slice a part of its hour: buckets split over several rows
    con = open_segments(tmp_path)
    assert con.sql("SELECT count(*) FROM gpu_samples_1h").fetchall()[0][0] > (
        con.sql("SELECT count(*) FROM (SELECT DISTINCT bucket_ts, host, gpu_index, job_id "
                "FROM gpu_samples_1h)").fetchall()[0][0]
    )  # fmt: skip
    hour = timedelta(hours=1)
    for first_h, end_h, bucket_s in ((0, 3, 3600), (0, 3, 300), (0, 3, 60), (1, 2, 3600)):
        # [1 h, 2 h) is all roll-ups, its one hour in four parts: its whole hour, the parts
        # added, gives the hosts' interval
        window = Window(START + first_h * hour, START + end_h * hour, bucket_s=bucket_s)
        _assert_buckets_totals(con, window)
    _assert_buckets_totals(_raw_only(tmp_path), Window(START, START + timedelta(hours=3)))


def test_a_fresh_tail_and_a_window_ending_inside_a_rolled_up_hour(tmp_path: Path) -> None:
    store = SegmentStore(tmp_path)
    published = 950  # samples per host: up to 00:38:10, two UTC days
    for first in range(0, published, SLICE):
        _publish(store, first, min(published, first + SLICE))
    update_rollups(store)
    con = open_segments(tmp_path)
    newest = START + timedelta(seconds=(published - 1) * FLEET.interval_s)
    week = _week_to(newest + timedelta(milliseconds=1))
    assert [stage[0] for stage in rollup_stages(con, week)] == ["gpu_samples_1h", "gpu_samples_1m"]
    _assert_buckets_totals(con, week)
    _assert_buckets_totals(con, Window(START, START + timedelta(hours=2, minutes=20, seconds=25)))


def test_a_lost_sample_in_the_raw_tail(tmp_path: Path) -> None:
    store = SegmentStore(tmp_path)
    for first in range(0, 900, SLICE):
        _publish(store, first, first + SLICE)
    seq = store.snapshot().published_seq + 1
    lost_at = pa.scalar(START + timedelta(seconds=950 * FLEET.interval_s))
    for host in ("e1", "e2", "w1"):
        table = gpu_table(FLEET, host, 900, 954)
        table = table.filter(pc.invert(pc.equal(table["ts"], lost_at.cast(table["ts"].type))))
        store.publish(seq, {"gpu_samples": store.write("gpu_samples", table, seq)})
        seq += 1
    update_rollups(store)
    end = START + timedelta(seconds=953 * FLEET.interval_s, milliseconds=1)
    _assert_buckets_totals(open_segments(tmp_path), _week_to(end))


def test_raw_samples_with_an_agent_outage(tmp_path: Path) -> None:
    fleet = Fleet(
        clusters={"c": ("h",)}, gpus_per_host=2, start=START, duration_s=7200, interval_s=15,
        jobs=(Job("j", ("h",), (0,), 0, 7200, 0.5, sm_active=0.25),),
    )  # fmt: skip
    write_segments(fleet, tmp_path, rollups=False)
    con = open_segments(tmp_path)
    con.execute(
        "CREATE TABLE kept AS SELECT * FROM gpu_samples WHERE NOT (ts >= $gone AND ts < $back)",
        {"gone": START + timedelta(minutes=10), "back": START + timedelta(minutes=30)},
    )
    con.execute("DROP VIEW gpu_samples")
    con.execute("ALTER TABLE kept RENAME TO gpu_samples")
    _assert_buckets_totals(con, Window(START, START + timedelta(hours=6), bucket_s=3600))
    _assert_buckets_totals(con, Window(START, START + timedelta(hours=1), bucket_s=60))


def test_an_empty_window(tmp_path: Path) -> None:
    got = window_totals(open_segments(tmp_path), Window(START, START + timedelta(hours=1)), 10.0)
    assert astuple(got) == (0.0, 0.0, 0.0, 0.0, None, 0.0, 0, 0)
