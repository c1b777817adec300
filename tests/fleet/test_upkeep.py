"""Fleet upkeep on real Iceberg tables in an S3 server: compaction keeps every row and leaves one
sorted file, retention drops raw partitions but keeps their roll-ups, expiry forgets snapshots."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from fleetscope.settings import Settings
from simulator.maker.batches import EPOCH_MS, gpu_batch
from simulator.wire import TEST_TOKEN, post_batch
from warehouse.fleet import reader, upkeep
from warehouse.fleet.gateway import Gateway

DAY_MS = 86_400_000
T0 = datetime.fromtimestamp(EPOCH_MS / 1000, UTC)


@pytest.fixture
def gateway(fleet_settings: Settings) -> Iterator[Gateway]:
    gw = Gateway(fleet_settings)
    gw.start()
    try:
        yield gw
    finally:
        gw.stop()


def fill(gw: Gateway, days: int, batches: int) -> None:
    for day in range(days):
        for i in range(batches):
            batch = gpu_batch("h1", start_ms=EPOCH_MS + day * DAY_MS + i * 10_000, cluster="c1")
            assert post_batch(gw.url, "gpu_samples", batch, token=TEST_TOKEN).status == 202


def test_compaction_rewrites_a_partition_as_one_sorted_file_with_the_same_rows(
    gateway: Gateway,
) -> None:
    fill(gateway, days=1, batches=4)
    tables = gateway.writer.tables
    (part,) = upkeep.partitions(tables, "gpu_samples")
    before, _ = reader.scan(tables, "gpu_samples", part.start, part.end)
    assert upkeep.file_count(tables, part) == 4
    assert upkeep.compact(tables, part) == 4
    after, stats = reader.scan(tables, "gpu_samples", part.start, part.end)
    assert stats.files == 1
    assert after.sort_by([("ts", "ascending"), ("gpu_index", "ascending")]).equals(
        before.sort_by([("ts", "ascending"), ("gpu_index", "ascending")])
    )
    ts = after.column("ts").to_pylist()
    assert ts == sorted(ts)
    assert upkeep.compact(tables, part) == 0  # one file: nothing to do


def test_retention_drops_old_raw_partitions_and_keeps_their_hourly_rollups(
    gateway: Gateway,
) -> None:
    fill(gateway, days=3, batches=1)
    tables = gateway.writer.tables
    dropped = upkeep.retention(tables, "gpu_samples", days=1, now=T0 + timedelta(days=2, hours=1))
    assert [p.day for p in dropped] == [T0.date()]
    raw, _ = reader.scan(tables, "gpu_samples", T0, T0 + timedelta(days=3))
    assert sorted({t.date() for t in raw.column("ts").to_pylist()}) == [
        T0.date() + timedelta(days=1),
        T0.date() + timedelta(days=2),
    ]
    rollup = tables.table(upkeep.ROLLUP_1H)
    rows = rollup.scan().to_arrow()
    assert rows.num_rows == 8  # 8 GPUs x the one hour of day 0 that had samples
    assert set(rows.column("samples").to_pylist()) == {10}


def test_snapshot_expiry_keeps_the_current_snapshot_and_its_rows(gateway: Gateway) -> None:
    fill(gateway, days=1, batches=3)
    tables = gateway.writer.tables
    table = tables.table("gpu_samples")
    table.refresh()
    assert len(table.snapshots()) == 3
    expired = upkeep.expire_snapshots(
        tables, "gpu_samples", timedelta(0), datetime.now(UTC) + timedelta(seconds=1)
    )
    table.refresh()
    assert (expired, len(table.snapshots())) == (2, 1)
    rows, _ = reader.scan(tables, "gpu_samples", T0, T0 + timedelta(days=1))
    assert rows.num_rows == 3 * 80


def test_compaction_is_due_only_where_a_partition_has_several_files(gateway: Gateway) -> None:
    from analyzers.run.celery_app import make_app
    from analyzers.run.fleet import compaction_due

    fill(gateway, days=2, batches=1)
    tables = gateway.writer.tables
    day0 = T0.date()
    batch = gpu_batch("h2", start_ms=EPOCH_MS, cluster="c1", seed=9)
    assert post_batch(gateway.url, "gpu_samples", batch, token=TEST_TOKEN).status == 202
    assert compaction_due(tables, "gpu_samples") == [[day0.isoformat(), "c1"]]
    schedule = make_app(gateway.settings).conf.beat_schedule
    assert schedule["fleetscope-fleet-upkeep"]["task"] == "fleetscope.fleet_upkeep"
