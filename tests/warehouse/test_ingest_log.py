"""The ingest log (issue 27): a batch is acknowledged once it is in the log, flushed to the store in
the background, and replayed after a crash exactly once; a damaged log loses nothing silently."""

from __future__ import annotations

import logging
import signal
import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from bench.fuzz import start_server
from simulator.maker.batches import EPOCH_MS, gpu_batch
from simulator.wire import post_batch
from warehouse.read.reader import open_segments
from warehouse.storage.ingest_log import START, IngestLog, LogEntry
from warehouse.storage.segments import SegmentStore
from warehouse.storage.writer import Writer

TOKEN = "ingestlog-" + "0" * 22


def entry(batch_id: str, hosts: int = 1) -> LogEntry:
    data = pa.concat_tables([gpu_batch(f"{batch_id}-h{h}", timestamps=2) for h in range(hosts)])
    return LogEntry(
        batch_id, "gpu_samples", data.num_rows, "agent-a", "0.1", "d" * 32,
        datetime(2026, 11, 28, tzinfo=UTC), data,
    )  # fmt: skip


def test_records_come_back_in_order_with_their_ledger_entries(tmp_path: Path) -> None:
    log = IngestLog(tmp_path / "log")
    appended = log.append([entry("b1"), entry("b2", hosts=2)])
    log.sync()
    log.close()
    replayed = IngestLog(tmp_path / "log").replay(START)
    assert [r.entry.batch_id for r in replayed] == ["b1", "b2"]
    assert [r.end for r in replayed] == [r.end for r in appended]
    assert replayed[1].entry.data.equals(entry("b2", hosts=2).data)
    assert (replayed[1].entry.rows, replayed[1].entry.agent) == (32, "agent-a")
    assert IngestLog(tmp_path / "log").replay(appended[0].end)[0].entry.batch_id == "b2"


def test_a_torn_tail_is_cut_off_with_a_warning_and_its_bytes_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = IngestLog(tmp_path / "log")
    (whole,) = log.append([entry("whole")])
    log.append([entry("torn")])
    log.sync()
    log.close()
    path = tmp_path / "log" / "000000000001.log"
    path.write_bytes(path.read_bytes()[:-100])  # a crash in the middle of the second append
    with caplog.at_level(logging.WARNING):
        replayed = IngestLog(tmp_path / "log").replay(START)
    assert [r.entry.batch_id for r in replayed] == ["whole"]
    assert path.stat().st_size == whole.end.offset
    assert "truncated a torn record" in caplog.text
    (kept,) = (tmp_path / "log" / "quarantine").iterdir()
    assert kept.name == f"000000000001-{whole.end.offset}.torn"


def test_a_record_with_a_bad_checksum_is_quarantined_and_the_next_ones_replayed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = IngestLog(tmp_path / "log")
    first, _, _ = log.append([entry("first"), entry("flipped"), entry("third")])
    log.sync()
    log.close()
    path = tmp_path / "log" / "000000000001.log"
    raw = bytearray(path.read_bytes())
    raw[first.end.offset + 40] ^= 0xFF  # one bit rot inside the second record's payload
    path.write_bytes(bytes(raw))
    with caplog.at_level(logging.ERROR):
        replayed = IngestLog(tmp_path / "log").replay(START)
    assert [r.entry.batch_id for r in replayed] == ["first", "third"]
    assert "checksum mismatch" in caplog.text
    (kept,) = (tmp_path / "log" / "quarantine").iterdir()
    assert kept.name == f"000000000001-{first.end.offset}.bad"


def rows_in(writer: Writer, prefix: str) -> int:
    query = "SELECT count(*) FROM gpu_samples WHERE starts_with(host, ?)"
    (count,) = writer.cursor().execute(query, [prefix]).fetchall()[0]
    return int(count)


def test_the_ledger_sees_batches_logged_but_not_yet_flushed(tmp_path: Path) -> None:
    writer = Writer(
        tmp_path / "t.duckdb", SegmentStore(tmp_path / "segments"),
        flush_rows=10**6, flush_interval_s=0.05, queue_max_rows=10**6,
        log_flush_interval_s=3600,  # never flushed in the background during this test
    )  # fmt: skip
    writer.start()
    try:
        first, _ = writer.submit("gpu_samples", gpu_batch("led", timestamps=2), "b-1")
        assert first.wait(60) and first.status == 202 and not first.duplicate
        assert rows_in(writer, "led") == 0  # acknowledged from the log, not flushed yet
        again, _ = writer.submit("gpu_samples", gpu_batch("led", timestamps=2), "b-1")
        other, _ = writer.submit("gpu_samples", gpu_batch("led", timestamps=3), "b-1")
        assert again.wait(60) and other.wait(60)
        assert (again.status, again.duplicate) == (202, True)
        assert other.status == 409 and "already stored with other content" in str(other.error)
        writer.flush_log_now()
        assert rows_in(writer, "led") == 16
    finally:
        writer.stop()


def test_rows_become_readable_after_the_background_flush(tmp_path: Path) -> None:
    writer = Writer(
        tmp_path / "t.duckdb", SegmentStore(tmp_path / "segments"),
        flush_rows=10**6, flush_interval_s=0.05, queue_max_rows=10**6,
        log_flush_interval_s=0.2,
    )  # fmt: skip
    writer.start()
    try:
        tickets = [
            writer.submit("gpu_samples", gpu_batch(f"bg-{i}", timestamps=2), f"bg-{i}")[0]
            for i in range(3)
        ]
        assert all(t.wait(60) and t.status == 202 for t in tickets)
        deadline = time.monotonic() + 60
        while rows_in(writer, "bg-") < 48 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert rows_in(writer, "bg-") == 48
        # flushed log segments are deleted: only the one being appended to is left
        assert len(list((tmp_path / "t.ingest-log").glob("*.log"))) == 1
    finally:
        writer.stop()


def test_kill_9_between_ack_and_flush_keeps_every_acked_row_exactly_once(tmp_path: Path) -> None:
    """A real server that never flushes in the background is killed right after its acks; the
    next start replays the log: every acknowledged row is stored once, and a retry of an acked
    batch is answered duplicate."""
    data_dir = tmp_path / "data"
    never = {"FLEETSCOPE_WAREHOUSE_LOG_FLUSH_INTERVAL_S": "3600"}
    process, url = start_server(data_dir, TOKEN, **never)
    batches = {
        f"k9-{i}": gpu_batch(f"k9-{i}", start_ms=EPOCH_MS + i * 60_000, timestamps=2)
        for i in range(5)
    }
    try:
        for batch_id, batch in batches.items():
            answer = post_batch(url, "gpu_samples", batch, token=TOKEN, batch_id=batch_id)
            assert answer.status == 202 and answer.body.get("duplicate") is False
        process.send_signal(signal.SIGKILL)
        process.wait()
        assert open_segments(data_dir / "segments").execute(
            "SELECT count(*) FROM gpu_samples"
        ).fetchall() == [(0,)]  # nothing was flushed before the kill
        process, url = start_server(data_dir, TOKEN)
        retry = post_batch(url, "gpu_samples", batches["k9-0"], token=TOKEN, batch_id="k9-0")
        assert (retry.status, retry.body.get("duplicate")) == (202, True)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(120)
    conn = open_segments(data_dir / "segments")
    rows = conn.execute(
        "SELECT host, count(*), count(DISTINCT (gpu_index, ts)) FROM gpu_samples "
        "GROUP BY host ORDER BY host"
    ).fetchall()
    assert rows == [(f"k9-{i}", 16, 16) for i in range(5)]


def test_a_logged_batch_the_store_refuses_is_quarantined_and_the_rest_stored_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A log holding a batch DuckDB cannot take (a time past its range, as a log written before
    the ack-time check could hold): the replay stores its neighbours, keeps the guilty one in
    quarantine/ with an error, and records the position past it, so the next start replays
    nothing."""
    log = IngestLog(tmp_path / "t.ingest-log")
    poison = gpu_batch("bad", timestamps=1, gpus=2)
    poison = poison.set_column(0, "ts", pa.array([2**62] * 2, pa.timestamp("ms", tz="UTC")))
    good = entry("good")
    bad = LogEntry("bad", "gpu_samples", 2, "agent-b", "0.1", "e" * 32, good.received_at, poison)
    log.append([good, bad])
    log.sync()
    log.close()

    def open_writer() -> Writer:
        return Writer(
            tmp_path / "t.duckdb", SegmentStore(tmp_path / "segments"),
            flush_rows=10**6, flush_interval_s=0.05, queue_max_rows=10**6,
        )  # fmt: skip

    writer = open_writer()
    with caplog.at_level(logging.ERROR):
        writer.start()
    try:
        assert rows_in(writer, "good") == 16 and rows_in(writer, "bad") == 0
        assert writer.stats.batches_quarantined == 1
    finally:
        writer.stop()
    assert "logged batch bad from 'agent-b' (2 rows) cannot be stored" in caplog.text
    kept = sorted(p.suffix for p in (tmp_path / "t.ingest-log" / "quarantine").iterdir())
    assert kept == [".refused"]
    again = open_writer()
    again.start()
    try:
        assert rows_in(again, "good") == 16 and again.stats.batches_quarantined == 0
    finally:
        again.stop()
