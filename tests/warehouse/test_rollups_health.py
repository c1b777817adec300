"""The health roll-ups (error and throttle counters per minute and hour) and the job index."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pytest

from simulator.maker.batches import EPOCH_MS, gpu_batch
from warehouse.read.reader import open_segments
from warehouse.read.rollups import update_rollups
from warehouse.storage.segments import Segment, SegmentStore


def _with(batch: pa.Table, **columns: Sequence[object]) -> pa.Table:
    for name, values in columns.items():
        index = batch.schema.get_field_index(name)
        batch = batch.set_column(index, name, pa.array(values, batch.schema.field(name).type))
    return batch


def _publish(store: SegmentStore, seq: int, batch: pa.Table) -> None:
    store.publish(seq, {"gpu_samples": store.write("gpu_samples", batch, seq)})


def test_health_keeps_counts_and_counter_extremes_per_minute_and_hour(tmp_path: Path) -> None:
    store = SegmentStore(tmp_path)
    # One GPU, 30 s apart: minute 0 has two samples, minute 1 two, minute 2 one.
    batch = gpu_batch("n1", timestamps=5, gpus=1, interval_ms=30_000)
    _publish(
        store,
        1,
        _with(
            batch,
            xid_last=[0.0, 79.0, 0.0, 48.0, 0.0],
            ecc_dbe_total=[3.0, 3.0, 4.0, None, 6.0],
            pcie_replay_total=[10.0, 11.0, 12.0, 13.0, 14.0],
            temp_c=[60.0, 71.0, 65.0, 66.0, 64.0],
            job_id=["a", "a", "a", None, "b"],
            gpu_util=[10.0, 20.0, 30.0, 40.0, 50.0],
            gr_engine_active=[0.5, None, 0.7, 0.1, None],
            sm_active=[0.25, None, None, 0.2, 0.3],
        ),
    )
    assert update_rollups(store) == 1
    con = open_segments(tmp_path)
    minutes = con.execute(
        "SELECT (epoch_ms(bucket_ts) - ?) // 60000, samples, (epoch_ms(last_ts) - ?) // 1000, "
        "xid_samples, xid_last_max, ecc_dbe_total_min, ecc_dbe_total_max, "
        "pcie_replay_total_min, pcie_replay_total_max, temp_c_max "
        "FROM gpu_health_1m ORDER BY bucket_ts",
        [EPOCH_MS, EPOCH_MS],
    ).fetchall()
    assert minutes == [
        (0, 2, 30, 1, 79.0, 3.0, 3.0, 10.0, 11.0, 71.0),
        (1, 2, 90, 1, 48.0, 4.0, 4.0, 12.0, 13.0, 66.0),
        (2, 1, 120, 0, 0.0, 6.0, 6.0, 14.0, 14.0, 64.0),
    ]
    hour = con.execute(
        "SELECT samples, xid_samples, xid_last_max, ecc_dbe_total_min, ecc_dbe_total_max "
        "FROM gpu_health_1h"
    ).fetchall()
    assert hour == [(5, 2, 79.0, 3.0, 6.0)]
    jobs = con.execute(
        "SELECT job_id, host, gpu_index, (epoch_ms(first_ts) - ?) // 1000, "
        "(epoch_ms(last_ts) - ?) // 1000, samples FROM gpu_jobs_1d ORDER BY job_id",
        [EPOCH_MS, EPOCH_MS],
    ).fetchall()
    assert jobs == [("a", "n1", 0, 0, 60, 3), ("b", "n1", 0, 120, 120, 1)]
    # Per job-minute sums and counts: GR_ENGINE_ACTIVE, else GPU_UTIL / 100; blanks not counted.
    job_minutes = con.execute(
        "SELECT job_id, (epoch_ms(bucket_ts) - ?) // 60000, samples, gpu_util_sum, gpu_util_n, "
        "active_sum, active_n, sm_active_sum, sm_active_n FROM gpu_jobs_1m ORDER BY job_id, 2",
        [EPOCH_MS],
    ).fetchall()
    assert job_minutes == [
        ("a", 0, 2, 30.0, 2, pytest.approx(0.5 + 0.2), 2, 0.25, 1),
        ("a", 1, 1, 30.0, 1, 0.7, 1, None, 0),
        ("b", 2, 1, 50.0, 1, 0.5, 1, 0.3, 1),
    ]


def test_a_family_missing_for_a_day_is_computed_without_redoing_the_others(
    tmp_path: Path,
) -> None:
    """A warehouse rolled up before the health family existed gets it on the next pass."""
    store = SegmentStore(tmp_path)
    _publish(store, 1, gpu_batch("n1", timestamps=3, gpus=2))
    assert update_rollups(store) == 1
    before = store.snapshot()
    day = next(iter(before.by_date("gpu_samples")))
    usage_files = before.live("gpu_samples_1h") + before.live("gpu_samples_1m")
    # As the manifest of an older warehouse: usage roll-ups and their mark, no health ones.
    health: dict[str, tuple[list[Segment], list[Segment]]] = {
        t: (before.live(t), [])
        for t in ("gpu_health_1m", "gpu_health_1h", "gpu_jobs_1d", "gpu_jobs_1m")
    }
    assert store.swap(health, marks={f"health_jobs/{day}": ""})
    assert update_rollups(store) == 1
    after = store.snapshot()
    assert after.live("gpu_samples_1h") + after.live("gpu_samples_1m") == usage_files
    assert after.marks[f"health_jobs/{day}"] == after.marks[f"rollup/{day}"]
    assert open_segments(tmp_path).execute("SELECT sum(samples) FROM gpu_health_1h").fetchall() == [
        (6,)
    ]
    assert update_rollups(store) == 0
