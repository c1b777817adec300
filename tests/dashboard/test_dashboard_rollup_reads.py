"""The hosts and job pages read the warehouse's health roll-ups and job index; the numbers must be
exactly those of the raw samples alone, whatever the window and however stale the roll-ups."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from dashboard import data, dcgm, source
from simulator.maker.jobs import Fault, Fleet, Job, write_segments
from warehouse.read.rollups import ROLLUP_TABLES
from warehouse.storage.segments import SegmentStore

START = datetime(2026, 11, 15, 21, 0, 0, tzinfo=UTC)  # three hours before midnight UTC

FLEET = Fleet(
    clusters={"east": ("e1", "e2"), "west": ("w1",)},
    gpus_per_host=2,
    start=START,
    duration_s=6 * 3600,
    interval_s=10,
    noise=0.05,  # so a mean weighted wrongly shows
    jobs=(
        Job("long", ("e1",), (0, 1), 0, 6 * 3600, 0.8, sm_active=0.5),
        Job("short", ("e2",), (1,), 3 * 3600 + 25, 3 * 3600 + 1900, 0.3),
        Job("west", ("w1",), (0,), 4000, 5 * 3600, 0.6),
    ),
    # Faults start between minute and hour boundaries, so every tile kind sees a change.
    faults=(
        Fault("w1", 0, 2 * 3600 + 35, xid=79, ecc_dbe=2),
        Fault("e2", 1, 3 * 3600 + 1805, pcie_replays=7, thermal_throttle_s=12.5),
        Fault("e1", 1, 5 * 3600 + 3590, xid=48),
    ),
)


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("rolled") / "segments"
    write_segments(FLEET, root)  # with every roll-up, as maintenance leaves it
    return root


def _raw_only(root: Path) -> duckdb.DuckDBPyConnection:
    """The same warehouse with every roll-up hidden: what the queries read without them."""
    con = source.connect_segments(root)
    for table in ROLLUP_TABLES:
        con.execute(f"CREATE OR REPLACE VIEW {table} AS SELECT * FROM _empty_{table}")
    return con


NEWEST = START + timedelta(hours=6) - timedelta(seconds=10)
WINDOWS = [
    data.aligned(NEWEST + timedelta(milliseconds=1), timedelta(hours=6)),
    data.aligned(NEWEST + timedelta(milliseconds=1), timedelta(days=1)),
    data.aligned(NEWEST + timedelta(milliseconds=1), timedelta(days=7)),
    # Edges inside minutes and hours, a window ending in the past, one inside a single minute.
    data.Window(
        START + timedelta(seconds=95), START + timedelta(hours=4, seconds=17), bucket_s=300
    ),
    data.Window(
        START + timedelta(minutes=61), START + timedelta(minutes=61, seconds=30), bucket_s=60
    ),
]


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: f"{w.start:%H%M%S}-{w.end:%H%M%S}")
def test_host_health_from_rollups_is_exactly_the_raw_health(
    segments: Path, window: data.Window
) -> None:
    rolled = data.host_health(source.connect_segments(segments), window)
    raw = data.host_health(_raw_only(segments), window)
    pd.testing.assert_frame_equal(rolled, raw, check_exact=True)


def test_host_health_reports_the_faults(segments: Path) -> None:
    week = data.aligned(NEWEST + timedelta(milliseconds=1), timedelta(days=7))
    health = data.host_health(source.connect_segments(segments), week).set_index("host")
    assert health["gpus"].tolist() == [2, 2, 2]
    assert health.loc["w1", "xid_code"] == 79
    assert health.loc["w1", "xid_samples"] == (6 * 3600 - (2 * 3600 + 40)) // 10
    assert health.loc["w1", "ecc_dbe_new"] == 2
    assert health.loc["e2", "pcie_replays_new"] == 7
    assert health.loc["e2", "thermal_throttle_s"] == 12.5
    assert health.loc["e1", "xid_samples"] == 1  # the very last sample
    assert health["last_sample"].tolist() == [NEWEST] * 3


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: f"{w.start:%H%M%S}-{w.end:%H%M%S}")
def test_hosts_of_a_window_from_the_roll_ups_are_the_raw_hosts(
    segments: Path, window: data.Window
) -> None:
    rolled = dcgm.hosts_in(source.connect_segments(segments), window)
    assert rolled == dcgm.hosts_in(_raw_only(segments), window)
    assert rolled == ["e1", "e2", "w1"]  # every host samples every 10 s


@pytest.mark.parametrize("job_id", [None, "long"])
def test_gpu_panels_of_a_week_from_the_roll_ups_are_the_raw_panels(
    segments: Path, job_id: str | None
) -> None:
    """The GPUs page on a week (hourly buckets): every panel the roll-ups keep is the raw
    samples' mean per bucket (to the last bits of summing order); the memory clock, which they
    do not keep, is blank (the page says why)."""
    week = WINDOWS[2]
    assert week.bucket_s == 3600 and dcgm.reads_rollups(week)
    assert not dcgm.reads_rollups(WINDOWS[1])  # a day: 5-minute buckets, raw samples
    hosts = ["e1", "e2", "w1"]
    rolled = dcgm.gpu_panels(source.connect_segments(segments), week, hosts, job_id)
    raw = dcgm.gpu_panels(_raw_only(segments), week, hosts, job_id)
    assert len(raw) == (6 * 6 if job_id is None else 2 * 6)  # GPUs x the six hours
    assert rolled["mem_clock_mhz"].isna().all()
    assert rolled[["temp_c", "power_w", "util_pct"]].notna().all().all()
    pd.testing.assert_frame_equal(
        rolled.drop(columns="mem_clock_mhz"),
        raw.drop(columns="mem_clock_mhz"),
        check_exact=False,
        rtol=1e-12,
    )


@pytest.mark.parametrize("job_id", ["long", "short", "west", "no-such-job"])
def test_job_series_from_the_job_index_is_exactly_the_raw_series(
    segments: Path, job_id: str
) -> None:
    con = source.connect_segments(segments)
    raw = _raw_only(segments)
    span = data.job_span(con, job_id)
    assert span == data.job_span(raw, job_id)
    if span is None:
        assert job_id == "no-such-job"
        return
    expected = _plain_job_series(raw, job_id, span)
    for reader in (con, raw):
        # Sums over minutes and sums over samples differ in the last bits only.
        pd.testing.assert_frame_equal(
            data.job_gpu_series(reader, job_id, span), expected, check_exact=False, rtol=1e-12
        )


def _plain_job_series(
    con: duckdb.DuckDBPyConnection, job_id: str, window: data.Window
) -> pd.DataFrame:
    """The job series as one plain aggregate over every raw sample: the specification."""
    frame = data.query(
        con,
        """
        SELECT epoch_ms(ts) // $bucket_ms * $bucket_ms AS bucket_ms,
               host || ':' || CAST(gpu_index AS VARCHAR) AS gpu,
               avg(gpu_util) AS gpu_util_pct,
               100 * avg(coalesce(gr_engine_active, gpu_util / 100.0)) AS active_pct,
               100 * avg(sm_active) AS sm_active_pct,
               100 * avg(tensor_active) AS tensor_active_pct,
               100 * avg(dram_active) AS dram_active_pct,
               avg(fb_used_mib) AS fb_used_mib, avg(power_w) AS power_w
        FROM gpu_samples
        WHERE job_id = $job AND ts >= to_timestamp($start) AND ts < to_timestamp($end)
        GROUP BY ALL ORDER BY 1, 2
        """,
        bucket_ms=window.bucket_s * 1000,
        job=job_id,
        start=window.start.timestamp(),
        end=window.end.timestamp(),
    )
    frame["bucket"] = pd.to_datetime(frame["bucket_ms"], unit="ms", utc=True)
    return frame.drop(columns=["bucket_ms"])


def test_samples_published_after_the_roll_up_are_still_seen(tmp_path: Path) -> None:
    """The newest day is re-rolled every maintenance pass; between passes, raw rows fill in."""
    root = tmp_path / "segments"
    first = Fleet(
        clusters={"c": ("h1", "h2")}, gpus_per_host=1, start=START, duration_s=3600, interval_s=10,
        jobs=(Job("j", ("h1",), (0,), 0, 3600, 0.5),),
    )  # fmt: skip
    write_segments(first, root)
    later = Fleet(
        clusters={"c": ("h1", "h2")}, gpus_per_host=1, start=START + timedelta(hours=1),
        duration_s=1800, interval_s=10,
        jobs=(Job("j", ("h1", "h2"), (0,), 0, 1800, 0.5),),
        faults=(Fault("h2", 0, 600, ecc_dbe=3),),
    )  # fmt: skip
    write_segments(later, root, rollups=False)
    con = source.connect_segments(root)
    newest = START + timedelta(hours=1, minutes=30, seconds=-10)
    assert data.latest_sample(con) == newest == data.latest_sample(_raw_only(root))
    span = data.job_span(con, "j")
    assert span is not None
    assert span.start == START
    assert span.end == newest + timedelta(milliseconds=1)
    assert data.job_hosts(con, "j").keys() == {"h1", "h2"}
    pd.testing.assert_frame_equal(
        data.job_gpu_series(con, "j", span),
        _plain_job_series(_raw_only(root), "j", span),
        check_exact=False,
        rtol=1e-12,
    )
    window = data.aligned(span.end, timedelta(hours=6))
    health = data.host_health(con, window)
    pd.testing.assert_frame_equal(health, data.host_health(_raw_only(root), window))
    assert health.set_index("host").loc["h2", "ecc_dbe_new"] == 3
    assert SegmentStore(root).snapshot().live("gpu_health_1h")


def test_the_newest_sample_may_be_on_an_unallocated_gpu(tmp_path: Path) -> None:
    root = tmp_path / "segments"
    fleet = Fleet(
        clusters={"c": ("h",)}, gpus_per_host=2, start=START, duration_s=7200, interval_s=10,
        jobs=(Job("j", ("h",), (0,), 0, 1800, 0.5),),
    )  # fmt: skip
    write_segments(fleet, root)
    newest = START + timedelta(seconds=7190)
    assert data.latest_sample(source.connect_segments(root)) == newest
    assert data.latest_sample(_raw_only(root)) == newest
    assert data.latest_sample(source.connect_segments(tmp_path / "empty")) is None


def test_time_sliced_segments_hold_the_same_samples_in_time_order(tmp_path: Path) -> None:
    """The benchmark's layout (a segment per slice of time, every host) changes no sample."""
    fleet = Fleet(**{**FLEET.__dict__, "noise": 0.0, "duration_s": 4 * 3600})
    write_segments(fleet, tmp_path / "per-host", rollups=False)
    write_segments(fleet, tmp_path / "sliced", rollups=False, slice_s=3600)
    sliced = SegmentStore(tmp_path / "sliced").snapshot().live("gpu_samples")
    assert len(sliced) == 4  # 21:00-01:00 UTC: three slices on the first day, one on the next
    order = "ORDER BY ts, host, gpu_index"
    rows = [
        source.connect_segments(tmp_path / name).sql(f"SELECT * FROM gpu_samples {order}")
        for name in ("per-host", "sliced")
    ]
    assert rows[0].to_arrow_table().equals(rows[1].to_arrow_table())
    first = source.connect_segments(tmp_path / "sliced").sql(
        f"SELECT epoch_ms(min(ts)), epoch_ms(max(ts)) FROM read_parquet('{tmp_path / 'sliced' / sliced[0].path}')"
    )
    assert first.fetchall() == [
        (int(START.timestamp() * 1000), int(START.timestamp() * 1000) + 3590_000)
    ]
