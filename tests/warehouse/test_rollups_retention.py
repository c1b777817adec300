"""Roll-ups (exact means and maxima, recomputed only when a day changed) and raw retention."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa

from simulator.maker.batches import EPOCH_MS, gpu_batch
from warehouse.read.reader import open_segments
from warehouse.read.rollups import update_rollups
from warehouse.storage.compaction import compact
from warehouse.storage.retention import expire
from warehouse.storage.segments import SegmentStore
from warehouse.storage.writer import Writer

DAY_MS = 86_400_000


def _util_batch(start_ms: int, values: list[float]) -> pa.Table:
    """One GPU of one host, one sample per second, with the given gpu_util values."""
    batch = gpu_batch("n1", start_ms=start_ms, timestamps=len(values), gpus=1)
    return batch.set_column(batch.schema.get_field_index("gpu_util"), "gpu_util", pa.array(values))


def test_minute_and_hour_rollups_are_exact_and_only_recomputed_on_change(tmp_path: Path) -> None:
    store = SegmentStore(tmp_path)
    store.publish(
        1, {"gpu_samples": store.write("gpu_samples", _util_batch(EPOCH_MS, [10.0, 30.0]), 1)}
    )
    minute_two = EPOCH_MS + 60_000
    store.publish(
        2, {"gpu_samples": store.write("gpu_samples", _util_batch(minute_two, [50.0]), 2)}
    )
    assert update_rollups(store) == 1
    rows = open_segments(tmp_path).execute(
        "SELECT epoch_ms(bucket_ts) - ?, samples, gpu_util_mean, gpu_util_max, job_id "
        "FROM gpu_samples_1m ORDER BY bucket_ts",
        [EPOCH_MS],
    )
    assert rows.fetchall() == [(0, 2, 20.0, 30.0, "job-1"), (60_000, 1, 50.0, 50.0, "job-1")]
    hour = open_segments(tmp_path).execute(
        "SELECT samples, gpu_util_mean, gpu_util_max FROM gpu_samples_1h"
    )
    assert hour.fetchall() == [(3, 30.0, 50.0)]
    assert compact(store, target_bytes=10**9) == 1
    assert update_rollups(store) == 0  # compaction kept rows and the highest seq: no new input
    store.publish(
        3, {"gpu_samples": store.write("gpu_samples", _util_batch(minute_two + 1000, [70.0]), 3)}
    )
    assert update_rollups(store) == 1
    # The new segment's samples are rolled up alone and added as a part of the day: a minute may
    # hold several rows, which readers add up by key.
    minute = open_segments(tmp_path).execute(
        "SELECT sum(samples), sum(gpu_util_sum) / sum(gpu_util_n), max(gpu_util_max) "
        "FROM gpu_samples_1m GROUP BY bucket_ts ORDER BY bucket_ts"
    )
    assert minute.fetchall() == [(2, 20.0, 30.0), (2, 60.0, 70.0)]


def test_retention_drops_old_raw_days_from_segments_and_duckdb_but_keeps_rollups(
    tmp_path: Path,
) -> None:
    store = SegmentStore(tmp_path / "segments")
    writer = Writer(
        tmp_path / "t.duckdb", store, flush_rows=1, flush_interval_s=0.01, queue_max_rows=10**6
    )
    writer.start()
    try:
        for i, start in enumerate((EPOCH_MS - 20 * DAY_MS, EPOCH_MS)):
            ticket, _ = writer.submit(
                "gpu_samples", gpu_batch("n", start_ms=start, timestamps=2), f"b{i}"
            )
            assert ticket.wait(30) and ticket.error is None
        assert update_rollups(store) == 2
        today = datetime.fromtimestamp(EPOCH_MS / 1000, UTC).date()
        assert expire(store, writer, keep_days=14, today=today) == 1
        raw = writer.cursor().execute("SELECT count(*) FROM gpu_samples").fetchall()
        ledger = writer.cursor().execute("SELECT count(*) FROM ingest_batches").fetchall()
    finally:
        writer.stop()
    view = open_segments(tmp_path / "segments")
    assert view.execute("SELECT count(*) FROM gpu_samples").fetchall() == [(16,)]
    assert raw == [(16,)]
    assert ledger == [(2,)]  # batches received today are kept, whatever their sample times
    assert view.execute("SELECT sum(samples) FROM gpu_samples_1m").fetchall() == [(32,)]
    assert today - timedelta(days=20) < today


def test_retention_keeps_a_day_whose_acknowledged_rows_still_sit_in_the_ingest_log(
    tmp_path: Path,
) -> None:
    store = SegmentStore(tmp_path / "segments")
    writer = Writer(
        tmp_path / "t.duckdb",
        store,
        flush_rows=10**6,
        flush_interval_s=0.01,
        queue_max_rows=10**6,
        log_flush_interval_s=3600.0,  # nothing leaves the log unless flushed here
    )
    old_day = EPOCH_MS - 20 * DAY_MS
    today = datetime.fromtimestamp(EPOCH_MS / 1000, UTC).date()
    writer.start()
    try:
        first, _ = writer.submit(
            "gpu_samples", gpu_batch("n", start_ms=old_day, timestamps=1), "stored"
        )
        assert first.wait(30) and first.error is None
        writer.flush_log_now()
        assert update_rollups(store) == 1  # the old day is stored and rolled up: expirable
        second, _ = writer.submit(
            "gpu_samples", gpu_batch("m", start_ms=old_day + 60_000, timestamps=2), "logged"
        )
        assert second.wait(30) and second.error is None  # acknowledged, in the log only

        assert expire(store, writer, keep_days=14, today=today) == 0  # the day waits, whole
        assert writer.cursor().execute("SELECT count(*) FROM gpu_samples").fetchall() == [(8,)]

        writer.flush_log_now()
        assert update_rollups(store) == 1
        assert expire(store, writer, keep_days=14, today=today) == 2  # flushed: it goes whole
        raw = writer.cursor().execute("SELECT count(*) FROM gpu_samples").fetchall()
    finally:
        writer.stop()
    assert raw == [(0,)]
    view = open_segments(tmp_path / "segments")
    assert view.execute("SELECT count(*) FROM gpu_samples").fetchall() == [(0,)]
    assert view.execute("SELECT sum(samples) FROM gpu_samples_1m").fetchall() == [(24,)]
