"""The committer merges each partition's staged files into one before it commits them (issue 27),
on a real PostgreSQL and S3 server: a commit adds one time-sorted file per partition whatever the
number of gateways and flushes, every row lands once, a reader never sees a row twice nor loses
the small files it listed, a merge of files another committer took is refused, and the orphan
sweep keeps every staged file while deleting the merged-away ones only past its safety age.
Committed files merge by size tiers (ten of a tier become one), and neither that merge nor the
hourly compaction reads a staged file or rewrites a large one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pyarrow.parquet as pq

from simulator.maker.batches import EPOCH_MS, gpu_batch
from simulator.wire import TEST_TOKEN, post_batch
from warehouse.catalog import staging
from warehouse.fleet import orphans, reader, upkeep
from warehouse.fleet.gateway import Gateway
from warehouse.fleet.merge import merge_staged
from warehouse.fleet.rewrite import FANOUT, LARGE_BYTES, TIER_BASE_BYTES, packed, tier, tiered
from warehouse.fleet.tables import to_table_schema
from warehouse.fleet.writer import write_data_files

START = datetime.fromtimestamp(EPOCH_MS / 1000, UTC)
DAY = (START, START + timedelta(days=1))


def send(gw: Gateway, host: str, cluster: str, seed: int) -> None:
    """One batch (80 rows), staged as this gateway's own file at once."""
    batch = gpu_batch(host, start_ms=EPOCH_MS + seed * 10_000, cluster=cluster, seed=seed)
    assert post_batch(gw.url, "gpu_samples", batch, token=TEST_TOKEN).status == 202
    gw.writer.flush_log_now()


def staged(gw: Gateway) -> dict[str, list[staging.StagedFile]]:
    with gw.catalog.connect() as conn:
        return staging.mergeable(conn, "gpu_samples")


def test_one_commit_adds_one_time_sorted_file_per_partition_from_every_gateways_flushes(
    gateways: list[Gateway],
) -> None:
    for n in range(3):
        for g, gw in enumerate(gateways):
            for cluster in ("c1", "c2"):
                send(gw, f"node-{g}", cluster, seed=n)
    small = staged(gateways[0])
    assert sorted(len(files) for files in small.values()) == [6, 6]  # 2 partitions x 6 flushes
    tables = gateways[0].writer.tables
    store = tables.table("gpu_samples").io

    assert sorted(gw.committer.run_once() for gw in gateways) == [0, 12]  # every staged file
    table = tables.table("gpu_samples")
    table.refresh()
    files = [t.file for t in table.scan().plan_files()]
    assert len(files) == 2 and len(table.snapshots()) == 1  # one file per partition, one append
    for data_file in files:
        with store.new_input(data_file.file_path).open() as stream:
            ts = pq.read_table(stream).column("ts")
        assert ts.to_pylist() == sorted(ts.to_pylist())  # time-sorted
    holder = max(gateways, key=lambda gw: gw.committer.stats.files_merged)
    assert (holder.committer.stats.files_merged, holder.committer.stats.merged_files) == (12, 2)
    rows, _ = reader.scan(tables, "gpu_samples", *DAY)
    assert rows.num_rows == 12 * 80
    keys = rows.select(["cluster", "host", "gpu_index", "ts"]).group_by(
        ["cluster", "host", "gpu_index", "ts"]
    )
    assert keys.aggregate([]).num_rows == rows.num_rows  # each row once
    for files_of in small.values():  # the small files stay for readers, until the sweep
        for f in files_of:
            assert store.new_input(f.path).exists()
    assert sum(gw.committer.stats.conflicts for gw in gateways) == 0


def test_a_reader_sees_each_row_once_across_the_merge_and_still_reads_the_files_it_listed(
    gateways: list[Gateway],
) -> None:
    a, b = gateways
    send(a, "h1", "c1", seed=0)
    send(b, "h2", "c1", seed=1)
    tables = a.writer.tables
    table = tables.table("gpu_samples")
    with a.catalog.connect() as conn:
        listed = staging.readable(conn, "gpu_samples", *DAY, set(), 0)
    assert len(listed) == 2
    assert a.committer.lease.hold("gpu_samples")
    merged = merge_staged(a.catalog, "gpu_samples", table, a.name)
    assert (merged.partitions, merged.files_in, merged.files_out) == (1, 2, 1)
    for path in listed:  # listed before the merge: still there to read
        with table.io.new_input(path).open() as stream:
            assert pq.read_table(stream).num_rows == 80
    rows, _ = reader.scan(tables, "gpu_samples", *DAY)
    assert rows.num_rows == 160  # the merged file only, not committed yet
    assert a.committer.run_once() == 1
    rows, _ = reader.scan(tables, "gpu_samples", *DAY)
    assert rows.num_rows == 160


def test_a_merge_is_refused_when_a_staged_file_was_assigned_meanwhile(
    gateways: list[Gateway],
) -> None:
    """A committer that lost its lock mid-merge (another took the files): its swap changes
    nothing and its merged file is left as an orphan."""
    a, b = gateways
    send(a, "h1", "c1", seed=0)
    send(b, "h2", "c1", seed=1)
    (files,) = staged(a).values()
    table = a.writer.tables.table("gpu_samples")
    with table.io.new_input(files[0].path).open() as stream:
        rows = pq.read_table(stream)
    (merged,) = write_data_files("gpu_samples", table, to_table_schema(rows, table), a.name)
    with a.catalog.begin() as conn:
        assert staging.assign(conn, "gpu_samples", "other-committer", 1) == [files[0].path]
    with a.catalog.begin() as conn:
        assert not staging.replace(conn, [f.path for f in files], [merged])
    with a.catalog.connect() as conn:
        assert staging.uncommitted(conn, "gpu_samples") == {f.path for f in files}


def test_the_sweep_keeps_staged_files_whatever_their_age_and_takes_merged_away_ones(
    gateways: list[Gateway],
) -> None:
    a, b = gateways
    send(a, "h1", "c1", seed=0)
    send(b, "h2", "c1", seed=1)
    table = a.writer.tables.table("gpu_samples")
    (files,) = staged(a).values()
    small = sorted(f.path for f in files)
    later = datetime.now(UTC) + timedelta(days=30)  # every file is past any safety age
    assert orphans.orphans(table, timedelta(0), later) == []  # staged: kept, though unreached
    assert a.committer.lease.hold("gpu_samples")
    merge_staged(a.catalog, "gpu_samples", table, a.name)
    assert orphans.orphans(table, timedelta(0), later) == small  # merged away: theirs to delete
    assert orphans.sweep(table, orphans.ORPHAN_MIN_AGE, datetime.now(UTC)) == []  # not yet
    assert a.committer.run_once() == 1
    assert orphans.sweep(table, timedelta(0), later) == small
    rows, _ = reader.scan(a.writer.tables, "gpu_samples", *DAY)
    assert rows.num_rows == 160


def test_a_compaction_rewrites_only_committed_files_and_leaves_staged_ones_to_the_committer(
    gateways: list[Gateway],
) -> None:
    """The hourly compaction runs while gateways stage files: rows it read from staged files
    would be committed twice, once in its rewrite and once by the committer."""
    a, _ = gateways
    for seed in range(2):
        send(a, "h1", "c1", seed=seed)
        assert a.committer.run_once() == 1
    send(a, "h1", "c1", seed=2)  # staged, not committed
    tables = a.writer.tables
    (part,) = upkeep.partitions(tables, "gpu_samples")
    assert upkeep.compact(tables, part) == 2
    assert a.committer.run_once() == 1
    rows, _ = reader.scan(tables, "gpu_samples", *DAY)
    assert rows.num_rows == 3 * 80


def test_ten_committed_files_of_one_tier_become_one_and_every_row_stays_once(
    gateways: list[Gateway],
) -> None:
    a, _ = gateways
    for seed in range(FANOUT):
        send(a, "h1", "c1", seed=seed)
        assert a.committer.run_once() == 1
    table = a.writer.tables.table("gpu_samples")
    table.refresh()
    assert len(list(table.scan().plan_files())) == 1  # the tenth commit merged the tier
    assert (a.committer.stats.tier_merges, a.committer.stats.tier_files_merged) == (1, FANOUT)
    rows, _ = reader.scan(a.writer.tables, "gpu_samples", *DAY)
    assert rows.num_rows == FANOUT * 80
    keys = ["host", "gpu_index", "ts"]
    assert rows.select(keys).group_by(keys).aggregate([]).num_rows == rows.num_rows


def test_no_tiered_merge_on_a_day_retention_rolls_up_within_a_day(gateways: list[Gateway]) -> None:
    """The roll-up records the raw files it rolled up by path: a rewrite beside it would have
    the next roll-up count the rewritten rows twice."""
    a, _ = gateways
    a.committer.raw_retention_days = 0  # today's partition is retention's now
    for seed in range(FANOUT):
        send(a, "h1", "c1", seed=seed)
        a.committer.run_once()
    table = a.writer.tables.table("gpu_samples")
    table.refresh()
    assert len(list(table.scan().plan_files())) == FANOUT
    assert a.committer.stats.tier_merges == 0


def sized(*sizes: int) -> list[Any]:
    """Planned files of these byte sizes (what the policies look at)."""
    return [SimpleNamespace(file=SimpleNamespace(file_size_in_bytes=n)) for n in sizes]


def test_tiers_grow_by_the_fanout_and_only_a_full_tier_below_the_large_size_is_merged() -> None:
    base = TIER_BASE_BYTES * FANOUT
    assert [tier(n) for n in (0, base - 1, base, base * FANOUT - 1, base * FANOUT)] == [
        0,
        0,
        1,
        1,
        2,
    ]
    assert tiered(sized(*[1000] * (FANOUT - 1), base)) == []  # no tier holds FANOUT files
    full = sized(base, *[1000] * (FANOUT + 3))
    assert tiered(full) == full[1 : FANOUT + 1]  # FANOUT of the lowest full tier
    busy = sized(*[LARGE_BYTES // 5] * FANOUT)  # a busy partition's commits: 6.4 MiB each
    assert tiered(busy) == busy[:5]  # as many as fit in LARGE_BYTES
    assert tiered(sized(*[LARGE_BYTES // 2] * FANOUT)) == []  # two would pass LARGE_BYTES


def test_compaction_packs_small_files_in_groups_up_to_the_large_size_and_skips_large_ones() -> None:
    third = LARGE_BYTES // 3
    files = sized(LARGE_BYTES, third, third, third, third, 10, LARGE_BYTES + 1)
    assert packed(files) == [files[1:4], files[4:6]]
    assert packed(sized(LARGE_BYTES, 10)) == []  # one small file: nothing to merge
