"""Fleet upkeep on real Iceberg tables in an S3 server: compaction keeps every row and leaves one
sorted file, retention drops raw partitions but keeps their roll-ups, expiry forgets snapshots,
and the batch ledger in PostgreSQL forgets ids past raw retention plus a margin."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
from sqlalchemy import insert, select

from fleetscope.contract import TABLES
from fleetscope.errors import ConfigError
from simulator.maker.batches import EPOCH_MS, gpu_batch
from simulator.wire import TEST_TOKEN, post_batch
from tests.fleet.conftest import landed
from warehouse.catalog import ledger, staging
from warehouse.fleet import reader, upkeep
from warehouse.fleet.gateway import Gateway

DAY_MS = 86_400_000
T0 = datetime.fromtimestamp(EPOCH_MS / 1000, UTC)


def fill(gw: Gateway, days: int, batches: int) -> None:
    for day in range(days):
        for i in range(batches):
            batch = gpu_batch("h1", start_ms=EPOCH_MS + day * DAY_MS + i * 10_000, cluster="c1")
            assert post_batch(gw.url, "gpu_samples", batch, token=TEST_TOKEN).status == 202
            landed(gw)  # one committed file per batch


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


def test_rows_without_a_cluster_are_compacted_rolled_up_and_dropped_like_any_partition(
    gateway: Gateway,
) -> None:
    """The contract's cluster is nullable (an agent with no agent.cluster, an import): its rows
    form a partition with a null cluster, which upkeep once named "None" and never matched, so
    they were never compacted, rolled up or dropped."""
    for i in range(2):
        batch = gpu_batch("h1", start_ms=EPOCH_MS + i * 10_000)
        batch = batch.set_column(
            batch.schema.get_field_index("cluster"),
            "cluster",
            pa.nulls(batch.num_rows, pa.string()),
        )
        assert post_batch(gateway.url, "gpu_samples", batch, token=TEST_TOKEN).status == 202
        landed(gateway)
    tables = gateway.writer.tables
    (part,) = upkeep.partitions(tables, "gpu_samples")
    assert (part.day, part.cluster) == (T0.date(), None)
    assert upkeep.file_count(tables, part) == 2
    assert upkeep.compact(tables, part) == 2
    dropped = upkeep.retention(tables, "gpu_samples", days=1, now=T0 + timedelta(days=2))
    assert [(p.day, p.cluster) for p in dropped] == [(T0.date(), None)]
    raw, _ = reader.scan(tables, "gpu_samples", T0, T0 + timedelta(days=1))
    assert raw.num_rows == 0
    rollup = tables.table(upkeep.ROLLUP_1H).scan().to_arrow()
    assert rollup.num_rows == 8
    assert set(rollup.column("samples").to_pylist()) == {20}
    assert set(rollup.column("cluster").to_pylist()) == {None}


def test_snapshot_expiry_keeps_the_current_snapshot_and_its_rows(gateway: Gateway) -> None:
    fill(gateway, days=1, batches=3)
    tables = gateway.writer.tables
    table = tables.table("gpu_samples")
    table.refresh()
    assert len(table.snapshots()) == 3
    expired = upkeep.expire_snapshots(
        tables,
        "gpu_samples",
        timedelta(0),
        datetime.now(UTC) + timedelta(seconds=1),
        gateway.catalog,
    )
    table.refresh()
    assert (expired, len(table.snapshots())) == (2, 1)
    rows, _ = reader.scan(tables, "gpu_samples", T0, T0 + timedelta(days=1))
    assert rows.num_rows == 3 * 80


def test_expiry_settles_a_dead_committers_landed_commit_so_it_is_never_committed_again(
    gateway: Gateway,
) -> None:
    """A committer appended staged files and died before marking them; nobody took over before
    the snapshot naming its commit expired. Expiry marks them first: the next committer must not
    append them again (the summary was the only proof they landed)."""
    tables = gateway.writer.tables
    batch = gpu_batch("h9", cluster="c1")
    assert post_batch(gateway.url, "gpu_samples", batch, token=TEST_TOKEN).status == 202
    gateway.writer.flush_log_now()
    committer = gateway.committer
    assert committer.lease.hold("gpu_samples")
    with gateway.catalog.begin() as conn:
        paths = staging.assign(conn, "gpu_samples", "landed", 100)
    table = tables.table("gpu_samples")
    table.refresh()
    committer._append("gpu_samples", table, paths, "landed")  # then it died
    table.append(batch.cast(table.schema().as_arrow()))  # a newer snapshot (no staged file)
    expired = upkeep.expire_snapshots(
        tables, "gpu_samples", timedelta(0), datetime.now(UTC) + timedelta(seconds=1),
        gateway.catalog,
    )  # fmt: skip
    assert expired == 1
    with gateway.catalog.connect() as conn:
        assert staging.waiting(conn, "gpu_samples") == 0
    assert committer.run_once() == 0 and committer.stats.recovered == 0
    rows, _ = reader.scan(tables, "gpu_samples", T0, T0 + timedelta(days=1))
    assert rows.num_rows == 2 * 80  # the landed commit's and the direct append's, each once


def test_compaction_is_due_only_where_a_partition_has_several_files(gateway: Gateway) -> None:
    from analyzers.run.celery_app import make_app
    from analyzers.run.fleet import compaction_due

    fill(gateway, days=2, batches=1)
    tables = gateway.writer.tables
    day0 = T0.date()
    batch = gpu_batch("h2", start_ms=EPOCH_MS, cluster="c1", seed=9)
    assert post_batch(gateway.url, "gpu_samples", batch, token=TEST_TOKEN).status == 202
    landed(gateway)
    assert compaction_due(tables, "gpu_samples") == [[day0.isoformat(), "c1"]]
    schedule = make_app(gateway.settings).conf.beat_schedule
    assert schedule["fleetscope-fleet-upkeep"]["task"] == "fleetscope.fleet_upkeep"


def ledger_rows(gw: Gateway) -> list[tuple[str, str]]:
    t = ledger.ingest_ledger
    with gw.catalog.connect() as conn:
        rows = conn.execute(select(t.c.batch_id, t.c.state).order_by(t.c.batch_id)).all()
    return [(str(b), str(s)) for b, s in rows]


def test_the_ledger_forgets_batch_ids_past_raw_retention_plus_the_margin_and_still_dedups_the_rest(
    gateway: Gateway,
) -> None:
    now = datetime(2026, 5, 20, 13, 30, tzinfo=UTC)
    cutoff = datetime(2026, 5, 5, tzinfo=UTC)  # 14 days of raw retention + 1 day of margin
    assert upkeep.ledger_cutoff(now, 14, 1) == cutoff
    with gateway.catalog.begin() as conn:
        for batch_id, state, claimed_at in [
            ("old-committed", ledger.COMMITTED, cutoff - timedelta(microseconds=1)),
            ("old-pending", ledger.PENDING, cutoff - timedelta(days=3)),  # its gateway died
            ("at-cutoff", ledger.COMMITTED, cutoff),
        ]:
            conn.execute(
                insert(ledger.ingest_ledger).values(
                    batch_id=batch_id, table_name="gpu_samples", rows=80, agent="h1",
                    flush_id=f"flush-{batch_id}", state=state, claimed_at=claimed_at,
                )
            )  # fmt: skip
    batch = gpu_batch("h1", cluster="c1")
    first = post_batch(gateway.url, "gpu_samples", batch, token=TEST_TOKEN, batch_id="recent")
    assert (first.status, first.body["duplicate"]) == (202, False)
    landed(gateway)  # in the ledger once staged
    assert ledger_rows(gateway) == [
        ("at-cutoff", "committed"),
        ("old-committed", "committed"),
        ("old-pending", "pending"),
        ("recent", "committed"),
    ]

    assert upkeep.prune_ledger(gateway.catalog, 14, 1, now) == 2
    assert ledger_rows(gateway) == [("at-cutoff", "committed"), ("recent", "committed")]
    retry = post_batch(gateway.url, "gpu_samples", batch, token=TEST_TOKEN, batch_id="recent")
    assert (retry.status, retry.body["duplicate"]) == (202, True)
    rows, _ = reader.scan(gateway.writer.tables, "gpu_samples", T0, T0 + timedelta(days=1))
    assert rows.num_rows == 80  # stored once


def test_a_negative_ledger_margin_is_refused_with_the_setting_named() -> None:
    with pytest.raises(ConfigError, match=r"fleet\.ledger_margin_days \(-1\)"):
        upkeep.ledger_cutoff(datetime(2026, 5, 20, tzinfo=UTC), 14, -1)


def test_upkeep_sends_compactions_then_retention_expiry_and_sweep_per_table_and_rollup_then_ledger_pruning(
    gateway: Gateway,
) -> None:
    from analyzers.run.fleet import upkeep_plan

    fill(gateway, days=1, batches=2)
    plan = [(task.name.removeprefix("fleetscope.fleet_"), args) for task, args in
            upkeep_plan(gateway.writer.tables)]  # fmt: skip
    assert plan == [
        ("compact_partition", ["gpu_samples", T0.date().isoformat(), "c1"]),
        *[
            (job, [table])
            for table in TABLES
            for job in ("retention", "expire_snapshots", "sweep_orphans")
        ],
        ("expire_snapshots", ["gpu_samples_1h"]),
        ("sweep_orphans", ["gpu_samples_1h"]),
        ("expire_snapshots", ["quantile_sketches"]),
        ("sweep_orphans", ["quantile_sketches"]),
        ("prune_ledger", []),
    ]
