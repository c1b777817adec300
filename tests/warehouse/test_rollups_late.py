"""Late samples of a day whose raw rows retention retired join its roll-ups, never replace them;
retention retires only raw segments the roll-ups hold."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from simulator.maker.batches import EPOCH_MS, gpu_batch
from warehouse.read.reader import open_segments
from warehouse.read.rollup_format import FORMAT, FORMAT_MARK
from warehouse.read.rollup_merge import MERGE_COLUMNS, ROLLUP_COLUMNS
from warehouse.read.rollups import BUCKETS, ROLLUP_TABLES, update_rollups
from warehouse.storage.maintenance import Maintenance, MaintenanceConfig
from warehouse.storage.retention import expire
from warehouse.storage.segments import SegmentStore
from warehouse.storage.writer import Writer

DAY_MS = 86_400_000
OLD_HOUR_MS = EPOCH_MS - 20 * DAY_MS + 5 * 3_600_000  # 05:00 of a day past 14 days' retention
NOW_S = (EPOCH_MS + 12 * 3_600_000) / 1000
TODAY = datetime.fromtimestamp(NOW_S, UTC).date()


def _samples(offsets_s: list[int], first: int, hour_ms: int = OLD_HOUR_MS) -> pa.Table:
    """One GPU's samples at `offsets_s` into the hour `hour_ms`, the old one unless told. Every averaged value is a multiple of
    1/4, so sums are exact in any order; sm_active is blank on every third sample."""
    batch = pa.concat_tables(
        gpu_batch("n1", start_ms=hour_ms + s * 1000, timestamps=1, gpus=1, seed=first + s)
        for s in offsets_s
    )
    for column in ROLLUP_COLUMNS:
        values: list[float | None] = [
            ((first + i) * 7 % 13) * 0.25 + 0.25 for i in range(batch.num_rows)
        ]
        if column == "sm_active":
            values = [None if (first + i) % 3 == 0 else v for i, v in enumerate(values)]
        index = batch.schema.get_field_index(column)
        batch = batch.set_column(index, column, pa.array(values, pa.float64()))
    return batch


FIRST = _samples([0, 5, 70, 75, 130, 600, 610, 1800, 3000, 3599], 0)  # the hour's 10 samples
LATE = _samples([6, 620, 2000], 100)  # 3 late ones: two in known minutes, one in a new minute


def _rollups(root: Path) -> dict[str, list[dict[str, object]]]:
    con = open_segments(root)
    return {
        table: con.sql(f"SELECT * FROM {table} ORDER BY ALL").to_arrow_table().to_pylist()
        for table in ROLLUP_TABLES
    }


def _rolled_up_together(root: Path, *batches: pa.Table) -> dict[str, list[dict[str, object]]]:
    """The roll-ups of all `batches` taken together, in a store of their own."""
    store = SegmentStore(root)
    store.publish(1, {"gpu_samples": store.write("gpu_samples", pa.concat_tables(batches), 1)})
    update_rollups(store)
    return _rollups(root)


def _live(store: SegmentStore, table: str) -> list[str]:
    return sorted(s.path for s in store.snapshot().live(table))


def _publish(store: SegmentStore, seq: int, batch: pa.Table) -> None:
    store.publish(seq, {"gpu_samples": store.write("gpu_samples", batch, seq)})


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[SegmentStore, Writer]]:
    """The embedded server's parts: a segment store and the writer that publishes into it."""
    store = SegmentStore(tmp_path / "segments")
    writer = Writer(
        tmp_path / "t.duckdb", store, flush_rows=1, flush_interval_s=0.01, queue_max_rows=10**6
    )
    writer.start()
    yield store, writer
    writer.stop()


def _ingest(writer: Writer, batch: pa.Table, batch_id: str) -> None:
    ticket, _ = writer.submit("gpu_samples", batch, batch_id)
    assert ticket.wait(30) and ticket.error is None


def test_late_samples_of_a_retired_hour_join_its_rollups_once(
    tmp_path: Path, server: tuple[SegmentStore, Writer]
) -> None:
    store, writer = server
    root = store.root
    now = [NOW_S]
    config = MaintenanceConfig(interval_s=60, target_bytes=10**9, grace_s=0, retention_days=14)
    maintenance = Maintenance(store, writer, config, clock=lambda: now[0])
    _ingest(writer, FIRST, "first")
    assert maintenance.run_once()["expired"] == 1
    view = open_segments(root)
    assert view.sql("SELECT count(*) FROM gpu_samples").fetchall() == [(0,)]
    assert view.sql("SELECT samples FROM gpu_samples_1h").fetchall() == [(10,)]

    _ingest(writer, LATE, "late")  # the agent's spool, replayed weeks later
    done = maintenance.run_once()
    assert done["rolled_up_days"] == 1
    assert "expired" not in done  # retention waits its hour: the roll-up step retired them
    assert _live(store, "gpu_samples") == []
    merged = _rollups(root)
    assert merged == _rolled_up_together(tmp_path / "together", FIRST, LATE)
    every = pa.concat_tables([FIRST, LATE])
    util, sm = every.column("gpu_util"), every.column("sm_active")
    hour = open_segments(root).sql(
        "SELECT samples, gpu_util_mean, gpu_util_max, sm_active_sum, sm_active_n, sm_active_mean "
        "FROM gpu_samples_1h"
    )
    assert hour.fetchall() == [
        (
            13,
            pc.mean(util).as_py(),
            pc.max(util).as_py(),
            pc.sum(sm).as_py(),
            pc.count(sm).as_py(),
            pc.sum(sm).as_py() / pc.count(sm).as_py(),
        )
    ]

    before = {table: _live(store, table) for table in ROLLUP_TABLES}
    now[0] += 7200  # retention's hour has passed: it runs too
    done = maintenance.run_once()
    assert done["rolled_up_days"] == 0 and done["expired"] == 0
    assert _rollups(root) == merged
    assert {table: _live(store, table) for table in ROLLUP_TABLES} == before


def test_a_segment_published_between_rollup_and_retention_waits_to_be_rolled_up(
    tmp_path: Path,
) -> None:
    store = SegmentStore(tmp_path / "segments")
    _publish(store, 1, FIRST.slice(0, 6))
    assert update_rollups(store) == 1
    _publish(store, 2, FIRST.slice(6))  # after the roll-up step, before the retention step
    assert expire(store, None, keep_days=14, today=TODAY) == 0  # the day waits, whole
    assert len(_live(store, "gpu_samples")) == 2

    assert update_rollups(store) == 1  # the next pass
    assert expire(store, None, keep_days=14, today=TODAY) == 2
    assert _live(store, "gpu_samples") == []

    _publish(store, 3, LATE.slice(0, 1))  # late, after the day was retired
    assert update_rollups(store) == 1  # joins the roll-ups, and retires with that swap
    assert _live(store, "gpu_samples") == []
    _publish(store, 4, LATE.slice(1))  # late, between a roll-up step and a retention step
    assert expire(store, None, keep_days=14, today=TODAY) == 0  # a late segment: not retention's
    assert len(_live(store, "gpu_samples")) == 1
    assert update_rollups(store) == 1
    assert _live(store, "gpu_samples") == []
    assert _rollups(store.root) == _rolled_up_together(tmp_path / "together", FIRST, LATE)


def _downgrade(store: SegmentStore, day: str) -> None:
    """The store as the build before per-column sums left it: `day`'s usage roll-ups without
    them, no format mark, and retention retiring raw days without marking them."""
    manifest = store.snapshot()
    changes = {}
    for table in BUCKETS:
        old = manifest.by_date(table)[day]
        new = [
            store.write_file(
                s.path.replace(".parquet", "-v1.parquet"),
                pq.read_table(store.path(s)).drop_columns(list(MERGE_COLUMNS)),
            )
            for s in old
        ]
        changes[table] = (old, new)
    changes["gpu_samples"] = (manifest.live("gpu_samples"), [])
    assert store.swap(changes, marks={FORMAT_MARK: "1"})


def test_rollups_written_before_sums_are_read_and_late_samples_merge_into_them(
    tmp_path: Path,
) -> None:
    store = SegmentStore(tmp_path / "segments")
    other_hour_ms = OLD_HOUR_MS + DAY_MS  # a second retired day: late samples after the upgrade
    _publish(store, 1, FIRST)
    _publish(store, 2, _samples([0, 1, 2], 200, other_hour_ms))
    assert update_rollups(store) == 2
    old_day = str(datetime.fromtimestamp(OLD_HOUR_MS / 1000, UTC).date())
    _downgrade(store, old_day)
    view = open_segments(store.root)  # old and new files together, read by column name
    both = view.sql("SELECT sum(samples), sum(gpu_util_n) FROM gpu_samples_1h")
    assert both.fetchall() == [(13, 3)]  # the other day's 3 samples have counts, the old none

    _publish(store, 3, LATE)  # fewer rows than rolled up: the day was retired
    assert update_rollups(store) == 1
    assert store.snapshot().marks[FORMAT_MARK] == FORMAT
    assert all(
        pq.read_schema(store.path(s)).names == ROLLUP_TABLES[t].names
        for t in BUCKETS
        for s in store.snapshot().live(t)
    )
    # Old rows count every sample for a column with a mean (docstring of rollup_merge): exact for
    # gpu_util, which no sample left blank; sm_active's old count is taken as 10, not 6. The
    # active fraction is GR_ENGINE_ACTIVE's, which every old sample had.
    every = pa.concat_tables([FIRST, LATE]).column("gpu_util")
    hour = open_segments(store.root).execute(
        "SELECT samples, gpu_util_mean, gpu_util_max, gpu_util_n, sm_active_n, active_n "
        "FROM gpu_samples_1h WHERE bucket_ts = make_timestamptz(?::BIGINT * 1000)",
        [OLD_HOUR_MS],
    )
    assert hour.fetchall() == [
        (
            13,
            pc.mean(every).as_py(),
            pc.max(every).as_py(),
            13,
            10 + pc.count(LATE["sm_active"]).as_py(),
            13,
        )
    ]

    # More late rows than the day had rolled up: known retired by the mark the last pass set.
    _publish(store, 4, _samples([5, 6, 7, 8], 300, other_hour_ms))
    assert update_rollups(store) == 1
    other = open_segments(store.root).execute(
        "SELECT samples FROM gpu_samples_1h WHERE bucket_ts = make_timestamptz(?::BIGINT * 1000)",
        [other_hour_ms],
    )
    assert other.fetchall() == [(7,)]
