"""Segments and the manifest: atomic publication, compaction, crash recovery, the writer's queue."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetscope.contract import GPU_SAMPLES
from fleetscope.errors import IngestError
from simulator.maker.batches import EPOCH_MS, gpu_batch
from warehouse.read.reader import open_segments
from warehouse.storage.compaction import compact
from warehouse.storage.segments import SegmentStore, read_manifest
from warehouse.storage.writer import Writer


def count(root: Path, sql: str = "SELECT count(*) FROM gpu_samples") -> int:
    return int(open_segments(root).execute(sql).fetchall()[0][0])


def test_a_batch_spanning_midnight_becomes_one_segment_per_day(tmp_path: Path) -> None:
    store = SegmentStore(tmp_path)
    batch = gpu_batch("n", start_ms=EPOCH_MS - 2_000, timestamps=4, gpus=1)
    segments = store.write("gpu_samples", batch, seq=7)
    assert [(s.date, s.rows, s.seq) for s in segments] == [
        (segments[0].date, 2, 7),
        (segments[1].date, 2, 7),
    ]
    assert segments[0].date < segments[1].date
    assert count(tmp_path) == 0  # written is not live
    store.publish(7, {"gpu_samples": segments})
    assert count(tmp_path) == 4


def test_compaction_merges_small_segments_and_readers_of_the_old_manifest_still_work(
    tmp_path: Path,
) -> None:
    store = SegmentStore(tmp_path)
    for seq in range(1, 6):
        batch = gpu_batch("n", start_ms=EPOCH_MS + seq * 10_000, timestamps=10, seed=seq)
        store.publish(seq, {"gpu_samples": store.write("gpu_samples", batch, seq)})
    before = open_segments(tmp_path)  # planned on the five-part manifest
    assert compact(store, target_bytes=10**9) == 1
    live = store.snapshot().live("gpu_samples")
    assert [(s.seq, s.rows) for s in live] == [(5, 400)]
    assert int(before.execute("SELECT count(*) FROM gpu_samples").fetchall()[0][0]) == 400
    assert count(tmp_path) == 400
    assert compact(store, target_bytes=10**9) == 0  # one file left: nothing to merge
    assert store.purge_retired(grace_s=3600) == 0
    assert store.purge_retired(grace_s=0) == 5
    assert count(tmp_path) == 400
    merged = open_segments(tmp_path).sql("SELECT * FROM gpu_samples").to_arrow_table()
    assert merged.column_names == GPU_SAMPLES.names


def test_a_swap_against_a_stale_view_changes_nothing(tmp_path: Path) -> None:
    store = SegmentStore(tmp_path)
    first = store.write("gpu_samples", gpu_batch("n", timestamps=1), 1)
    store.publish(1, {"gpu_samples": first})
    assert store.swap({"gpu_samples": (first, [])})
    assert not store.swap({"gpu_samples": (first, [])})  # already gone
    assert read_manifest(tmp_path).live("gpu_samples") == []


def test_rows_committed_before_a_crash_are_published_at_restart(tmp_path: Path) -> None:
    db, root = tmp_path / "t.duckdb", tmp_path / "segments"
    writer = Writer(
        db, SegmentStore(root), flush_rows=10**6, flush_interval_s=0.01, queue_max_rows=10**6
    )
    writer.start()
    ticket, _ = writer.submit("gpu_samples", gpu_batch("n", timestamps=2), "b1")
    assert ticket.wait(30) and ticket.error is None
    writer.stop()
    # Simulate a crash between the DuckDB commit and the manifest swap: forget the publication.
    manifest = (root / "manifest.json").read_text()
    (root / "manifest.json").write_text(
        manifest.replace('"published_seq": 1', '"published_seq": 0').replace(
            '"tables": {"gpu_samples": [', '"tables": {"gpu_samples": [], "x": ['
        )
    )
    stray = root / "gpu_samples" / "date=2000-01-01" / "000000000009-dead.parquet"
    stray.parent.mkdir(parents=True)
    stray.write_bytes(b"left by a flush that never committed")
    assert count(root) == 0
    again = Writer(
        db, SegmentStore(root), flush_rows=10**6, flush_interval_s=0.01, queue_max_rows=10**6
    )
    again.start()
    again.stop()
    assert count(root) == 16
    assert not stray.exists()


def test_a_full_queue_answers_503_and_a_retry_in_flight_joins_the_first(tmp_path: Path) -> None:
    writer = Writer(
        tmp_path / "t.duckdb",
        SegmentStore(tmp_path / "segments"),
        flush_rows=10**6,
        flush_interval_s=0.01,
        queue_max_rows=100,
    )  # not started: nothing drains the queue
    first, in_flight = writer.submit("gpu_samples", gpu_batch("n", timestamps=10), "b1")
    assert (first.rows, in_flight) == (80, False)
    same, in_flight = writer.submit("gpu_samples", gpu_batch("n", timestamps=10), "b1")
    assert (same is first, in_flight) == (True, True)
    with pytest.raises(IngestError, match=r"ingest queue is full \(80 rows waiting\)") as info:
        writer.submit("gpu_samples", gpu_batch("m", timestamps=10), "b2")
    assert info.value.status == 503
    writer.start()
    assert first.wait(30) and first.error is None and not first.duplicate
    writer.stop()
    assert count(tmp_path / "segments") == 80


def test_a_flush_of_more_batches_than_one_ledger_probe_drops_every_known_id(tmp_path: Path) -> None:
    writer = Writer(
        tmp_path / "t.duckdb",
        SegmentStore(tmp_path / "segments"),
        flush_rows=10**6,
        flush_interval_s=0.01,
        queue_max_rows=10**6,
    )  # not started: the whole queue goes in one flush, probed in chunks
    row = gpu_batch("n", timestamps=1, gpus=1)
    early = [writer.submit("gpu_samples", row, f"b{i}")[0] for i in range(0, 1200, 2)]
    writer.start()
    assert all(t.wait(30) and t.error is None and not t.duplicate for t in early)
    writer.stop()
    again = Writer(
        tmp_path / "t.duckdb",
        SegmentStore(tmp_path / "segments"),
        flush_rows=10**6,
        flush_interval_s=0.01,
        queue_max_rows=10**6,
    )
    tickets = [again.submit("gpu_samples", row, f"b{i}")[0] for i in range(1200)]
    again.start()
    assert all(t.wait(30) and t.error is None for t in tickets)
    again.stop()
    assert [t.duplicate for t in tickets] == [i % 2 == 0 for i in range(1200)]
    assert count(tmp_path / "segments") == 1200
