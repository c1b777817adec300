"""The orphan-file sweep on real Iceberg tables in an S3 server: it deletes exactly the files no
snapshot reaches (a lost commit attempt's, and those only expired snapshots named) once they are
older than the safety age, keeps younger ones, and leaves every row readable and the table
writable."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pyarrow.fs import S3FileSystem

from simulator.maker.batches import EPOCH_MS, gpu_batch
from simulator.wire import TEST_TOKEN, post_batch
from tests.fleet.conftest import landed, s3_filesystem, wait_until
from warehouse.fleet import orphans, reader, upkeep
from warehouse.fleet.gateway import Gateway

DAY0 = datetime.fromtimestamp(EPOCH_MS / 1000, UTC)


def put(fs: S3FileSystem, uri: str, body: bytes) -> datetime:
    """Write an object as a lost commit attempt leaves it; returns the store's time for it."""
    path = uri.removeprefix("s3://")
    with fs.open_output_stream(path) as out:
        out.write(body)
    mtime = fs.get_file_info(path).mtime
    assert mtime is not None
    return mtime.astimezone(UTC)


def test_the_sweep_deletes_exactly_the_unreached_files_past_the_safety_age(
    gateway: Gateway,
) -> None:
    for i in range(2):
        batch = gpu_batch("h1", start_ms=EPOCH_MS + i * 10_000, cluster="c1", seed=i)
        assert post_batch(gateway.url, "gpu_samples", batch, token=TEST_TOKEN).status == 202
        landed(gateway)
    tables = gateway.writer.tables
    table = tables.table("gpu_samples")
    table.refresh()
    appended = sorted(t.file.file_path for t in table.scan().plan_files())
    (part,) = upkeep.partitions(tables, "gpu_samples")
    assert upkeep.compact(tables, part) == 2  # the two appended files replaced by one
    table.refresh()
    current = table.current_snapshot()
    assert current is not None
    old = [s for s in table.snapshots() if s.snapshot_id != current.snapshot_id]
    kept_manifests = {m.manifest_path for m in current.manifests(table.io)}
    only_expired = {s.manifest_list for s in old} | (
        {m.manifest_path for s in old for m in s.manifests(table.io)} - kept_manifests
    )  # what only the snapshots about to expire name: their manifest lists and manifests
    expired = upkeep.expire_snapshots(
        tables, "gpu_samples", timedelta(0), datetime.now(UTC), gateway.catalog
    )
    assert expired == len(old) >= 2
    table.refresh()

    fs = s3_filesystem(gateway.config)
    location = table.location()
    lost_data = f"{location}/data/ts_day={DAY0.date()}/cluster=c1/00000-0-lost-attempt.parquet"
    lost_manifest = f"{location}/metadata/lost-attempt-m0.avro"
    newest = max(put(fs, lost_data, b"PAR1"), put(fs, lost_manifest, b"Obj"))
    young = f"{location}/data/ts_day={DAY0.date()}/cluster=c1/00000-0-in-flight.parquet"
    # a file the store stamps after every file above (its clock ticks in whole seconds)
    wait_until(lambda: put(fs, young, b"PAR1") > newest, 30, "a younger object time")
    cutoff = fs.get_file_info(young.removeprefix("s3://")).mtime
    assert cutoff is not None

    listed = {f.uri for f in orphans.stored(table)}
    reached = orphans.reachable(table)
    swept = orphans.sweep(table, timedelta(0), cutoff.astimezone(UTC))
    assert swept == sorted({*appended, lost_data, lost_manifest, *only_expired})
    assert {f.uri for f in orphans.stored(table)} == (listed - set(swept))
    assert young in {f.uri for f in orphans.stored(table)}  # younger than the cutoff: kept
    assert reached <= {f.uri for f in orphans.stored(table)}  # nothing reached was touched

    rows, _ = reader.scan(tables, "gpu_samples", DAY0, DAY0 + timedelta(days=1))
    assert rows.num_rows == 2 * 80
    more = gpu_batch("h2", cluster="c1", seed=7)
    assert post_batch(gateway.url, "gpu_samples", more, token=TEST_TOKEN).status == 202
    landed(gateway)
    rows, _ = reader.scan(tables, "gpu_samples", DAY0, DAY0 + timedelta(days=1))
    assert rows.num_rows == 3 * 80
    assert orphans.sweep(table, timedelta(0), cutoff.astimezone(UTC)) == []  # nothing left


def test_the_default_safety_age_keeps_every_file_written_today(gateway: Gateway) -> None:
    batch = gpu_batch("h1", cluster="c1")
    assert post_batch(gateway.url, "gpu_samples", batch, token=TEST_TOKEN).status == 202
    landed(gateway)
    table = gateway.writer.tables.table("gpu_samples")
    lost = f"{table.location()}/data/ts_day={DAY0.date()}/cluster=c1/lost.parquet"
    put(s3_filesystem(gateway.config), lost, b"PAR1")
    assert orphans.orphans(table, timedelta(0), datetime.now(UTC) + timedelta(seconds=2)) == [lost]
    assert orphans.sweep(table, orphans.ORPHAN_MIN_AGE, datetime.now(UTC)) == []
    assert lost in {f.uri for f in orphans.stored(table)}
