"""The fleet's hourly roll-up table on real Iceberg tables in an S3 server: late samples of an hour
already rolled up are merged into its row (the row becomes the roll-up of all the hour's samples,
and a re-run merges nothing twice), a table made before rows kept sums and counts gains them, and
the roll-up table's snapshots expire and its orphan files are swept like the raw tables'."""

from __future__ import annotations

import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from analyzers.run.celery_app import make_app
from fleetscope.settings import Settings
from simulator.maker.batches import EPOCH_MS, gpu_batch
from simulator.wire import TEST_TOKEN, post_batch
from tests.fleet.conftest import landed
from tests.fleet.test_fleet_celery import BROKER
from tests.fleet.test_fleet_e2e import env_for, recipe_config
from warehouse.fleet import orphans, reader, upkeep
from warehouse.fleet.gateway import Gateway
from warehouse.fleet.rollup import MERGE_COLUMNS, ROLLUP_1H, rollup_rows
from warehouse.fleet.tables import FleetConfig, FleetTables
from warehouse.read.rollups import ROLLUP_COLUMNS

T0 = datetime.fromtimestamp(EPOCH_MS / 1000, UTC)
NOW = T0 + timedelta(days=2, hours=1)  # day 0 is past a one-day raw retention
KEY = [(k, "ascending") for k in ("ts", "host", "gpu_index")]


def quarters(batch: pa.Table, blank_sm_active_every: int = 0) -> pa.Table:
    """The batch with every rolled-up column a multiple of 0.25, so any sum of them is exact in
    any order (what makes "equal to the roll-up of all samples" an exact comparison), and,
    if asked, sm_active blank in every n-th row (a mean must divide by the values present)."""
    for name in ROLLUP_COLUMNS:
        values = pc.divide(pc.round(pc.multiply(batch.column(name), 4.0)), 4.0)
        if name == "sm_active" and blank_sm_active_every:
            blank = [i % blank_sm_active_every == 0 for i in range(batch.num_rows)]
            values = pc.if_else(pa.array(blank), pa.scalar(None, pa.float64()), values)
        batch = batch.set_column(batch.schema.get_field_index(name), name, values)
    return batch


def post(gw: Gateway, *batches: pa.Table) -> None:
    for batch in batches:
        assert post_batch(gw.url, "gpu_samples", batch, token=TEST_TOKEN).status == 202
        landed(gw)  # committed: one data file per batch, as upkeep's tests expect


def stored_rollup(tables: FleetTables) -> pa.Table:
    table = tables.table(ROLLUP_1H)
    table.refresh()
    return table.scan().to_arrow().sort_by(KEY)


def expected(tables: FleetTables, *batches: pa.Table) -> pa.Table:
    """The roll-up of all the samples taken together, in the stored table's types."""
    schema = tables.table(ROLLUP_1H).schema().as_arrow()
    return rollup_rows(pa.concat_tables(batches)).cast(schema).sort_by(KEY)


def test_a_late_sample_of_an_hour_already_rolled_up_makes_its_row_the_rollup_of_all_its_samples(
    gateway: Gateway,
) -> None:
    """Day 0 is rolled up and dropped; weeks later a spool brings more samples of h1's hour
    (sm_active blank in some) and an hour of h2 no row has yet."""
    tables = gateway.writer.tables
    first = quarters(gpu_batch("h1", cluster="c1"))
    post(gateway, first)
    assert [p.day for p in upkeep.retention(tables, "gpu_samples", days=1, now=NOW)] == [T0.date()]
    assert stored_rollup(tables).equals(expected(tables, first))

    late_h1 = quarters(
        gpu_batch("h1", start_ms=EPOCH_MS + 20_000, cluster="c1", timestamps=3, seed=5), 4
    )
    late_h2 = quarters(gpu_batch("h2", cluster="c1", gpus=2, seed=6))
    post(gateway, late_h1, late_h2)
    (part,) = upkeep.partitions(tables, "gpu_samples")
    assert upkeep.roll_up(tables, part) == 10  # h1's 8 GPUs, merged, and h2's 2
    merged = stored_rollup(tables)
    assert merged.equals(expected(tables, first, late_h1, late_h2))

    # The numbers themselves: h1's GPU 0 had 10 samples, then 3 more, one with sm_active blank.
    gpu0 = pa.concat_tables([first, late_h1]).filter(pc.field("gpu_index") == 0)
    row = merged.filter((pc.field("host") == "h1") & (pc.field("gpu_index") == 0))
    sm = [v for v in gpu0.column("sm_active").to_pylist() if v is not None]
    assert row.select(["samples", "sm_active_n", "sm_active_sum", "sm_active_mean"]).to_pylist() == [
        {"samples": 13, "sm_active_n": len(sm), "sm_active_sum": sum(sm),
         "sm_active_mean": sum(sm) / len(sm)}
    ]  # fmt: skip
    assert row.column("power_w_max").to_pylist() == [max(gpu0.column("power_w").to_pylist())]

    # A re-run (a retention that died before its delete) commits nothing and changes nothing.
    rollup = tables.table(ROLLUP_1H)
    snapshots = len(rollup.snapshots())
    assert upkeep.roll_up(tables, part) == 10
    rollup.refresh()
    assert len(rollup.snapshots()) == snapshots
    upkeep.retention(tables, "gpu_samples", days=1, now=NOW)
    assert stored_rollup(tables).equals(merged)
    raw, _ = reader.scan(tables, "gpu_samples", T0, T0 + timedelta(days=1))
    assert raw.num_rows == 0
    rollup.refresh()
    assert not [k for k in rollup.properties if k.startswith("fleetscope.rolled-files.")]


def test_retention_deletes_exactly_the_files_it_rolled_up_and_a_file_appended_meanwhile_waits(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gateway appends samples of the day between retention's roll-up and its delete: they are
    not in the roll-up yet, so they stay raw, and the next retention rolls them up."""
    tables = gateway.writer.tables
    first = quarters(gpu_batch("h1", cluster="c1"))
    meanwhile = quarters(gpu_batch("h1", start_ms=EPOCH_MS + 20_000, cluster="c1", timestamps=3))
    roll_up = upkeep._roll_up

    def then_a_gateway_appends(tables: FleetTables, part: upkeep.Partition) -> upkeep.RolledUp:
        rolled = roll_up(tables, part)
        post(gateway, meanwhile)
        return rolled

    post(gateway, first)
    monkeypatch.setattr(upkeep, "_roll_up", then_a_gateway_appends)
    upkeep.retention(tables, "gpu_samples", days=1, now=NOW)
    monkeypatch.undo()
    assert stored_rollup(tables).equals(expected(tables, first))
    raw, _ = reader.scan(tables, "gpu_samples", T0, T0 + timedelta(days=1))
    assert raw.num_rows == meanwhile.num_rows

    upkeep.retention(tables, "gpu_samples", days=1, now=NOW)
    assert stored_rollup(tables).equals(expected(tables, first, meanwhile))
    raw, _ = reader.scan(tables, "gpu_samples", T0, T0 + timedelta(days=1))
    assert raw.num_rows == 0


def test_a_rollup_table_made_before_sums_and_counts_gains_them_and_merges_its_old_rows(
    gateway: Gateway,
) -> None:
    """An existing deployment: its gpu_samples_1h rows have means and maxima only. The first
    roll-up after the upgrade adds the columns (old rows read them as null), and a late sample
    merges into an old row as if every sample of the row had each column its mean has (true
    here, as for every sample an agent sends with the column set)."""
    tables = gateway.writer.tables
    first = quarters(gpu_batch("h1", cluster="c1"))
    old = rollup_rows(first).drop_columns(list(MERGE_COLUMNS))
    legacy = tables.rollup_table(ROLLUP_1H, old.schema)
    legacy.append(old.cast(legacy.schema().as_arrow()))

    late = quarters(gpu_batch("h1", start_ms=EPOCH_MS + 20_000, cluster="c1", timestamps=3, seed=5))
    post(gateway, late)
    upkeep.retention(tables, "gpu_samples", days=1, now=NOW)
    legacy.refresh()
    assert legacy.schema().column_names[-len(MERGE_COLUMNS) :] == list(MERGE_COLUMNS)
    assert stored_rollup(tables).equals(expected(tables, first, late))


def test_the_rollup_tables_snapshots_expire_and_its_orphan_files_are_swept(
    gateway: Gateway,
) -> None:
    """Two retentions commit to gpu_samples_1h (the second merges late rows): each rewrites the
    partition as one file, expiry leaves the current snapshot only, and the sweep deletes every
    file only the expired snapshots named (the replaced data file among them), nothing else."""
    tables = gateway.writer.tables
    assert tables.existing(ROLLUP_1H) is None  # upkeep before any retention: nothing to do
    now = datetime.now(UTC) + timedelta(minutes=1)  # every object is older than this
    assert upkeep.expire_snapshots(tables, ROLLUP_1H, timedelta(0), now, gateway.catalog) == 0
    assert tables.existing(ROLLUP_1H) is None  # and it made no table

    post(gateway, gpu_batch("h1", cluster="c1"))
    upkeep.retention(tables, "gpu_samples", days=1, now=NOW)
    rollup = tables.table(ROLLUP_1H)
    rollup.refresh()
    replaced = {t.file.file_path for t in rollup.scan().plan_files()}
    post(gateway, gpu_batch("h1", start_ms=EPOCH_MS + 20_000, cluster="c1", timestamps=3))
    upkeep.retention(tables, "gpu_samples", days=1, now=NOW)
    rollup.refresh()
    live = {t.file.file_path for t in rollup.scan().plan_files()}
    assert len(live) == 1 and not live & replaced  # one file per partition: nothing to compact
    rows = stored_rollup(tables)

    snapshots = len(rollup.snapshots())
    assert snapshots >= 3
    expired = upkeep.expire_snapshots(tables, ROLLUP_1H, timedelta(0), now, gateway.catalog)
    rollup.refresh()
    assert (expired, len(rollup.snapshots())) == (snapshots - 1, 1)

    listed = {f.uri for f in orphans.stored(rollup)}
    reached = orphans.reachable(rollup)
    swept = orphans.sweep(rollup, timedelta(0), now)
    assert replaced <= set(swept)
    assert set(swept) == listed - reached
    assert {f.uri for f in orphans.stored(rollup)} == reached
    assert stored_rollup(tables).equals(rows)
    assert orphans.sweep(rollup, timedelta(0), now) == []


def test_compaction_leaves_alone_a_partition_retention_drops_within_a_day(gateway: Gateway) -> None:
    """Retention deletes exactly the raw files it rolled up; a compaction beside it would turn
    them into a file whose samples are already rolled up."""
    from analyzers.run.fleet import compaction_due

    post(gateway, gpu_batch("h1", cluster="c1"), gpu_batch("h2", cluster="c1"))
    tables = gateway.writer.tables
    day0 = [[T0.date().isoformat(), "c1"]]
    assert compaction_due(tables, "gpu_samples", raw_retention_days=1, now=T0) == day0
    late = T0 + timedelta(days=1, hours=1)
    assert compaction_due(tables, "gpu_samples", raw_retention_days=1, now=late) == []
    assert compaction_due(tables, "gpu_samples", raw_retention_days=2, now=late) == day0


@pytest.mark.slow
@pytest.mark.real_component("redis")
def test_a_celery_worker_keeps_the_rollup_table_through_the_upkeep_tasks(
    fleet_settings: Settings, tmp_path: Path
) -> None:
    """The tasks the hourly upkeep sends for gpu_samples_1h, on a real worker: before any
    retention they find no table and make none; after it, they keep the table (its snapshots and
    files are younger than the expiry and sweep ages, so nothing goes yet)."""
    redis = pytest.importorskip("redis")
    try:
        redis.Redis.from_url(BROKER).flushdb()
    except redis.exceptions.ConnectionError:
        pytest.skip("no Redis at 127.0.0.1:6379")
    settings = fleet_settings.with_overrides(
        celery__broker_url=BROKER, warehouse__raw_retention_days=0
    )
    gw = Gateway(settings)
    gw.start()
    try:
        post(gw, gpu_batch("h1", start_ms=EPOCH_MS - 86_400_000, cluster="c1"))
    finally:
        gw.stop()
    queue = f"fleet-test-{uuid.uuid4().hex[:8]}"
    env = {**env_for(settings, recipe_config(settings, tmp_path / "fleetscope.toml"), 0), "FLEETSCOPE_CELERY_BROKER_URL": BROKER,
           "FLEETSCOPE_WAREHOUSE_RAW_RETENTION_DAYS": "0"}  # fmt: skip
    log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "analyzers.run.celery_app", "worker",
         "--pool", "solo", "-Q", queue, "--loglevel", "WARNING"],
        env=env, cwd=Path(__file__).parents[2], stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    producer = make_app(settings)

    def run(task: str, *args: str) -> object:
        sent = producer.send_task(f"fleetscope.fleet_{task}", args=list(args), queue=queue)
        return sent.get(timeout=120)

    try:
        upkeep_of_rollup = [("expire_snapshots", ROLLUP_1H), ("sweep_orphans", ROLLUP_1H)]
        assert [run(*job) for job in upkeep_of_rollup] == [0, 0]
        tables = FleetTables(FleetConfig.from_settings(settings))
        assert tables.existing(ROLLUP_1H) is None
        yesterday = (T0 - timedelta(days=1)).date().isoformat()
        assert run("retention", "gpu_samples") == [f"{yesterday}/c1"]
        assert [run(*job) for job in upkeep_of_rollup] == [0, 0]
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        log.close()
    assert stored_rollup(tables).column("samples").to_pylist() == [10] * 8
