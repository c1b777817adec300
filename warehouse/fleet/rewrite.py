"""Rewriting committed data files of one partition as one: the hourly compaction and the committer's
tiered merge.

`rewrite(table, name, files)` reads exactly those data files (never the staged files readers add:
a rewrite that read them would commit their rows, and the committer would commit them again),
sorts their rows by (cluster, ts), writes one file and commits, in ONE Iceberg overwrite, the
deletion of exactly those files and the addition of the new one. pyiceberg checks that every file
to delete is still live in the table it commits on (`ValidationException` otherwise), so two
rewrites of the same file never both land, and a rewrite never loses a file appended meanwhile.

`tiered(files)` is the committer's merge policy, VictoriaMetrics' parts merging in small: files
are in tiers by size (tier k: below `TIER_BASE_BYTES` x `FANOUT`^(k+1)); when a partition holds
`FANOUT` files of one tier (below `LARGE_BYTES` / 2), they become one file of the next tier
(as many of them as fit in `LARGE_BYTES`). A
partition that gains one file per commit (one every `fleet.commit_interval_s`) so holds at most
about `FANOUT` - 1 files per tier, a handful of tiers plus its large files, and each byte is
rewritten once per tier (log_FANOUT of its growth) instead of the whole partition once an hour.

`packed(files)` is the compaction's: the files below `LARGE_BYTES` in groups of at most
`LARGE_BYTES` together, each rewritten as one (Iceberg's rewrite_data_files bin-packing in
small). Files already large are never rewritten again, so neither the committer nor the hourly
compaction re-reads a filled day, and neither holds more than about `LARGE_BYTES` of Parquet.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from fleetscope.contract import TABLES
from warehouse.fleet.tables import to_contract, to_table_schema

if TYPE_CHECKING:
    from pyiceberg.table import FileScanTask, Table

__all__ = ["FANOUT", "LARGE_BYTES", "TIER_BASE_BYTES", "packed", "rewrite", "tier", "tiered"]

FANOUT = 10  # files of one tier that make one of the next
TIER_BASE_BYTES = 64 * 1024  # tier 0: files below FANOUT x this (640 KiB)
LARGE_BYTES = 32 * 1024 * 1024  # files at or above it are never rewritten


def tier(file_bytes: int) -> int:
    """The tier of a file of `file_bytes`: 0 below TIER_BASE_BYTES x FANOUT, then one per x10."""
    level, bound = 0, TIER_BASE_BYTES * FANOUT
    while file_bytes >= bound:
        level += 1
        bound *= FANOUT
    return level


def tiered(tasks: Sequence[FileScanTask]) -> list[FileScanTask]:
    """Among the files below `LARGE_BYTES` / 2, the lowest tier holding `FANOUT` or more: its
    first files, at most FANOUT and `LARGE_BYTES` together (two at least); none when no tier is
    full. A commit's file of a busy partition (several MiB) so still merges with a few others
    into one of up to LARGE_BYTES, rather than waiting for the hourly compaction."""
    by_tier: dict[int, list[FileScanTask]] = {}
    for task in tasks:
        size = task.file.file_size_in_bytes
        if size < LARGE_BYTES // 2:
            by_tier.setdefault(tier(size), []).append(task)
    for level in sorted(by_tier):
        if len(by_tier[level]) >= FANOUT:
            chosen: list[FileScanTask] = []
            total = 0
            for task in by_tier[level][:FANOUT]:
                if total + task.file.file_size_in_bytes > LARGE_BYTES:
                    break
                chosen.append(task)
                total += task.file.file_size_in_bytes
            return chosen if len(chosen) >= 2 else []
    return []


def packed(tasks: Sequence[FileScanTask]) -> list[list[FileScanTask]]:
    """The files below `LARGE_BYTES` in groups of two or more whose bytes add up to at most
    `LARGE_BYTES` (greedy, in plan order); each group is rewritten as one file."""
    groups: list[list[FileScanTask]] = [[]]
    total = 0
    for task in tasks:
        size = task.file.file_size_in_bytes
        if size >= LARGE_BYTES:
            continue
        if groups[-1] and total + size > LARGE_BYTES:
            groups.append([])
            total = 0
        groups[-1].append(task)
        total += size
    return [g for g in groups if len(g) >= 2]


def rewrite(table: Table, name: str, tasks: Sequence[FileScanTask]) -> int:
    """Replace the data files of `tasks` (one partition's, planned on `table` as it is now) by
    one file of their rows sorted by (cluster, ts); returns the files replaced. Raises pyiceberg's
    CommitFailedException or ValidationException when the table moved under it (the caller
    re-plans)."""
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan, _dataframe_to_data_files

    if name not in TABLES:
        raise ValueError(f"{name} is not a contract table; its rows cannot be rewritten here")
    if not tasks:
        return 0
    read = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue()).to_table(tasks)
    rows = to_table_schema(to_contract(name, read), table)
    written = list(_dataframe_to_data_files(table.metadata, rows, table.io))
    with table.transaction() as tx, tx.update_snapshot().overwrite() as overwrite:
        for task in tasks:
            overwrite.delete_data_file(task.file)
        for data_file in written:
            overwrite.append_data_file(data_file)
    return len(tasks)
