"""The fleet usage (dashboard and reports) counts GPU-hours as the analyzers' frame does.

One job on one GPU for two hours, sampled every 10 s, with samples dropped as an agent outage
would: a gap up to `analyzers.max_gap_s` (300 s) stays allocated, a longer one does not
(`analyzers.accounting.sql`). Both readers are run over the same raw samples and window.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from analyzers.accounting.frames import FrameParams, prepare
from analyzers.accounting.usage import fleet_totals, gpu_buckets, job_efficiency
from analyzers.run.window import Window
from simulator.maker.jobs import Fleet, Job, write_segments
from warehouse.reader import open_segments

START = datetime(2026, 11, 16, 8, tzinfo=UTC)
END = START + timedelta(hours=2)


def _with_outage(tmp_path: Path, minutes: int) -> duckdb.DuckDBPyConnection:
    fleet = Fleet(
        clusters={"c": ("h",)}, gpus_per_host=1, start=START, duration_s=7200, interval_s=10,
        jobs=(Job("j", ("h",), (0,), 0, 7200, 0.5, sm_active=0.25),),
    )  # fmt: skip
    write_segments(fleet, tmp_path, rollups=False)
    con = open_segments(tmp_path)
    gone = START + timedelta(minutes=10)
    back = gone + timedelta(minutes=minutes)
    con.execute(
        "CREATE TABLE kept AS SELECT * FROM gpu_samples WHERE NOT (ts >= $gone AND ts < $back)",
        {"gone": gone, "back": back},
    )
    con.execute("DROP VIEW gpu_samples")
    con.execute("ALTER TABLE kept RENAME TO gpu_samples")
    return con


@pytest.mark.parametrize(
    ("outage_min", "allocated_h"),
    [
        (0, 2.0),
        (4, 2.0),  # 250 s gap <= 300 s: the scheduler still held the GPU
        (20, 2.0 - 20 / 60),  # 1,210 s gap: the sample before it counts one interval
    ],
)
def test_usage_and_the_analyzers_frame_count_the_same_hours(
    tmp_path: Path, outage_min: int, allocated_h: float
) -> None:
    con = _with_outage(tmp_path, outage_min)
    buckets = gpu_buckets(
        con, Window(START, END, bucket_s=300), default_interval_s=10.0, max_gap_s=300.0
    )
    totals = fleet_totals(buckets)
    assert totals.allocated_h == pytest.approx(allocated_h)
    assert totals.active_h == pytest.approx(0.5 * allocated_h)
    assert totals.sm_h == pytest.approx(0.25 * allocated_h)

    frame = prepare(con, Window(START, END), FrameParams(max_gap_s=300.0))
    alloc_h, active_mean = con.sql(
        f"SELECT alloc_h, active_mean FROM {frame.jobgpu} WHERE job_id = 'j'"
    ).fetchall()[0]
    assert alloc_h == pytest.approx(allocated_h)
    job = job_efficiency(buckets).set_index("job_id").loc["j"]
    assert job["allocated_h"] == pytest.approx(alloc_h)
    assert job["active_pct"] == pytest.approx(100 * active_mean)


def test_max_gap_s_is_the_readers_setting(tmp_path: Path) -> None:
    con = _with_outage(tmp_path, 4)
    buckets = gpu_buckets(
        con, Window(START, END, bucket_s=300), default_interval_s=10.0, max_gap_s=60.0
    )
    assert fleet_totals(buckets).allocated_h == pytest.approx(2.0 - 4 / 60)
