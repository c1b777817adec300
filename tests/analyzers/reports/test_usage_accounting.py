"""The fleet usage (dashboard and reports) counts GPU-hours as the analyzers' frame does.

One job on one GPU for two hours, sampled every 10 s, with samples dropped as an agent outage
would: a gap up to `analyzers.max_gap_s` (300 s) stays allocated, a longer one does not
(`analyzers.accounting.sql`). Both readers are run over the same raw samples and window.

Then the usage's two readers, the warehouse's roll-ups and raw samples, over columns only some
samples carry: both count a column for the samples that had it, and roll-ups written by older
builds are read by the rules of `warehouse.read.rollup_merge`.
"""

from __future__ import annotations

from dataclasses import astuple
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analyzers.accounting.frames import FrameParams, prepare
from analyzers.accounting.usage import ROLLUPS, fleet_totals, gpu_buckets, job_efficiency
from analyzers.accounting.usage import _rollup_for as rollup_for
from analyzers.run.window import Window
from simulator.maker.batches import gpu_batch
from simulator.maker.jobs import Fleet, Job, write_segments
from warehouse.read.reader import open_segments
from warehouse.read.rollup_format import FORMAT_MARK
from warehouse.read.rollup_merge import MERGE_COLUMNS
from warehouse.read.rollups import update_rollups
from warehouse.storage.segments import SegmentStore

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


# One GPU of one job, a sample every 10 s from 08:00 to 11:00; the window is 08:00-10:00 (720
# samples), which the roll-ups cover (the newest bucket, 10:00 or later, is never read).
PARTIAL_SAMPLES = 1080
PARTIAL_WINDOW = 720
ROLLUP_S = dict(ROLLUPS)
SM_STOPS_AT = 183  # SM_ACTIVE stops 30 min 30 s in, inside a minute and an hour
TENSOR_STOPS_AT = 123  # TENSOR_ACTIVE ten minutes before it (an exporter reporting it less often)
POWER_STOPS_AT = 360 + 90  # 09:15 on, no power reading


def _partially_reported() -> pa.Table:
    """Columns that only some samples carry, each as the raw samples would have them:
    GR_ENGINE_ACTIVE 0.5 but for every 4th scrape, GPU_UTIL 90 but for every 5th (every 20th
    has neither: its active fraction is unknown), SM_ACTIVE 0.25 and TENSOR_ACTIVE 0.5 until the
    exporter stops reporting them, power 300 W in the first hour and 100 W for 15 minutes of the
    second, then none."""
    batch = gpu_batch(
        "h", start_ms=int(START.timestamp() * 1000), timestamps=PARTIAL_SAMPLES, gpus=1,
        interval_ms=10_000, job_id="j", cluster="c",
    )  # fmt: skip
    i = range(PARTIAL_SAMPLES)
    columns = {
        "gr_engine_active": [None if k % 4 == 0 else 0.5 for k in i],
        "gpu_util": [None if k % 5 == 0 else 90.0 for k in i],
        "sm_active": [0.25 if k < SM_STOPS_AT else None for k in i],
        "tensor_active": [0.5 if k < TENSOR_STOPS_AT else None for k in i],
        "power_w": [300.0 if k < 360 else 100.0 if k < POWER_STOPS_AT else None for k in i],
    }
    for name, values in columns.items():
        batch = batch.set_column(
            batch.schema.get_field_index(name), name, pa.array(values, pa.float64())
        )
    return batch


def _readers(root: Path, rollup: str) -> tuple[duckdb.DuckDBPyConnection, ...]:
    """The warehouse read through `rollup` (the finer roll-up hidden when it is the hourly one),
    and the same warehouse with every usage roll-up hidden: raw samples only."""
    rolled, raw = open_segments(root), open_segments(root)
    for table in ("gpu_samples_1h", "gpu_samples_1m"):
        con = [raw] if table == rollup else [raw, rolled]
        for reader in con:
            reader.execute(f"CREATE OR REPLACE VIEW {table} AS SELECT * FROM _empty_{table}")
    return rolled, raw


@pytest.mark.parametrize("rollup", ["gpu_samples_1h", "gpu_samples_1m"])
def test_a_column_some_samples_lack_counts_for_the_samples_that_have_it(
    tmp_path: Path, rollup: str
) -> None:
    """Roll-ups keep each column's sum and count: known, active and SM-active GPU-hours and the
    utilization are those of the samples that had the column, from roll-ups as from raw rows."""
    store = SegmentStore(tmp_path)
    store.publish(1, {"gpu_samples": store.write("gpu_samples", _partially_reported(), 1)})
    assert update_rollups(store) == 1
    rolled_con, raw_con = _readers(tmp_path, rollup)
    window = Window(START, END, bucket_s=7200)
    assert rollup_for(rolled_con, window) == (rollup, ROLLUP_S[rollup], END.timestamp())
    assert rollup_for(raw_con, window) is None
    rolled = gpu_buckets(rolled_con, window, default_interval_s=30.0)
    raw = gpu_buckets(raw_con, window, default_interval_s=30.0)
    assert rolled["samples"].tolist() == raw["samples"].tolist() == [PARTIAL_WINDOW]

    n = range(PARTIAL_WINDOW)
    engine = [k for k in n if k % 4]
    fallback = [k for k in n if k % 4 == 0 and k % 5]  # GPU_UTIL / 100 stands in
    util = [k for k in n if k % 5]
    powered = [k for k in n if k < POWER_STOPS_AT]
    for buckets in (rolled, raw):
        row = buckets.iloc[0]
        assert row["interval_s"] == 10.0
        assert row["gpu_h"] == pytest.approx(PARTIAL_WINDOW * 10 / 3600)
        assert row["known_h"] == pytest.approx((len(engine) + len(fallback)) * 10 / 3600)
        assert row["active_h"] == pytest.approx((0.5 * len(engine) + 0.9 * len(fallback)) / 360)
        assert row["sm_known_h"] == pytest.approx(SM_STOPS_AT * 10 / 3600)
        assert row["sm_h"] == pytest.approx(0.25 * SM_STOPS_AT / 360)
        assert row["tensor_known_h"] == pytest.approx(TENSOR_STOPS_AT * 10 / 3600)
        assert row["tensor_h"] == pytest.approx(0.5 * TENSOR_STOPS_AT / 360)
        assert (row["util_n"], row["util_sum"]) == (len(util), pytest.approx(90.0 * len(util)))
        assert row["power_w_mean"] == pytest.approx((360 * 300 + 90 * 100) / len(powered))

    totals = fleet_totals(rolled)
    assert astuple(totals) == pytest.approx(astuple(fleet_totals(raw)))
    assert totals.active_pct == pytest.approx(
        100 * (0.5 * len(engine) + 0.9 * len(fallback)) / (len(engine) + len(fallback))
    )
    job = job_efficiency(rolled).set_index("job_id").loc["j"]
    assert (job["active_pct"], job["sm_active_pct"], job["tensor_active_pct"]) == (
        pytest.approx(totals.active_pct),
        pytest.approx(25.0),
        pytest.approx(50.0),
    )


def _written_by_an_older_build(store: SegmentStore, dropped: list[str], format_mark: str) -> None:
    """The usage roll-ups as a build before `dropped` existed left them (its format mark too)."""
    manifest = store.snapshot()
    changes = {}
    for table in ("gpu_samples_1h", "gpu_samples_1m"):
        old = manifest.live(table)
        new = [
            store.write_file(
                s.path.replace(".parquet", "-old.parquet"),
                pq.read_table(store.path(s)).drop_columns(dropped),
            )
            for s in old
        ]
        changes[table] = (old, new)
    assert store.swap(changes, marks={FORMAT_MARK: format_mark})


# What roll-up rows of an older layout are taken to hold (warehouse.read.rollup_merge), over the
# window: (columns the layout lacks, active samples, active sum, SM samples, power mean).
_ACTIVE_BY_ENGINE = len([k for k in range(PARTIAL_WINDOW) if k % 4])
_OLDER_LAYOUTS = {
    # Per-column sums, no active_*: GR_ENGINE_ACTIVE's samples only, the row having some.
    "2": (["active_sum", "active_n"], _ACTIVE_BY_ENGINE, 0.5 * _ACTIVE_BY_ENGINE, SM_STOPS_AT,
          (360 * 300 + 90 * 100) / POWER_STOPS_AT),
    # Means only: every sample of a row has each column its mean has.
    "1": (list(MERGE_COLUMNS), PARTIAL_WINDOW, 0.5 * PARTIAL_WINDOW, 360, (300 + 100) / 2),
}  # fmt: skip


@pytest.mark.parametrize("format_mark", sorted(_OLDER_LAYOUTS))
def test_rollups_of_an_older_layout_are_read_by_its_rule(tmp_path: Path, format_mark: str) -> None:
    """Roll-ups the upgrade has not rewritten yet (the view reads them by name, every column of
    the layout there even though no file has it) count as warehouse.read.rollup_merge says."""
    dropped, active_n, active_sum, sm_n, power_w = _OLDER_LAYOUTS[format_mark]
    store = SegmentStore(tmp_path)
    store.publish(1, {"gpu_samples": store.write("gpu_samples", _partially_reported(), 1)})
    assert update_rollups(store) == 1
    _written_by_an_older_build(store, dropped, format_mark)
    rolled, _raw = _readers(tmp_path, "gpu_samples_1h")
    row = gpu_buckets(rolled, Window(START, END, bucket_s=7200), 30.0).iloc[0]
    assert row["known_h"] == pytest.approx(active_n * 10 / 3600)
    assert row["active_h"] == pytest.approx(active_sum * 10 / 3600)
    assert row["sm_known_h"] == pytest.approx(sm_n * 10 / 3600)
    assert row["power_w_mean"] == pytest.approx(power_w)
