"""The committer's merge: a partition's staged files become one data file before they are committed.

Why: each gateway's log flush (about once a second) writes one data file per (day, cluster)
partition, so a table committing them as they are gained gateways x 3,600 files per partition
an hour, most of a few kB, until the hourly compaction (issue 27). The table's committer
(warehouse.fleet.committer) holds the table's commit lock, so it alone may touch the staged
files not assigned yet: before each commit it rewrites every partition that has two or more of
them as one file sorted by (cluster, ts), so a commit adds one file per partition and the table
gains at most 3,600 / `fleet.commit_interval_s` files per partition an hour (720 at 5 s),
whatever the number of gateways.

Safe for readers and for a committer killed anywhere:
- the merged file is written first, then ONE PostgreSQL transaction swaps the small files' staging
  rows for the merged file's (`staging.replace`), only if every small file is still staged. A
  reader's listing (one statement) holds either the small files or the merged one, never both;
- the small files stay in the object store, so a reader that listed them a moment ago still reads
  them; the orphan sweep deletes them later (no metadata and no staging row names them then);
- killed before the swap, the merged file is an orphan for the sweep and the small files are
  committed as they are; killed after it, the merged file is staged like any other.
The ledger is untouched: it records batches, not files, so exactly-once does not depend on which
files hold a batch's rows.

What it does not do: merge files already committed. Those are rewritten by size tier after each
append and by the hourly compaction (warehouse.fleet.rewrite), which skip the days retention
rolls up soon, because a roll-up records the raw files it rolled up by path
(warehouse.fleet.rollup).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
from sqlalchemy import Engine

from warehouse.catalog import staging
from warehouse.fleet.tables import to_contract, to_table_schema
from warehouse.fleet.writer import write_data_files

if TYPE_CHECKING:
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

__all__ = ["MERGE_MAX_BYTES", "Merged", "merge_staged"]

# The most staged bytes one merge reads (files beyond wait for the next pass): bounds the
# committer's memory. Staged files are one log flush each, far below it in steady state.
MERGE_MAX_BYTES = 256 * 1024 * 1024
READERS = 8  # staged files fetched at once


@dataclass
class Merged:
    """What one merge pass over a table did."""

    partitions: int = 0  # partitions rewritten
    files_in: int = 0  # staged files replaced
    files_out: int = 0  # merged files staged in their place
    bytes_in: int = 0
    ready: list[str] = field(default_factory=list)  # the staged paths this pass should commit


def merge_staged(
    catalog: Engine,
    name: str,
    table: Table,
    gateway: str,
    *,
    min_files: int = 2,
    max_bytes: int = MERGE_MAX_BYTES,
) -> Merged:
    """Rewrite each partition of `name` with at least `min_files` staged files as one file
    (see the module docstring); the caller holds the table's commit lock. `ready` lists what
    to commit now: the merged files and the files it found but did not merge; files staged
    while it merged wait for the next pass (else each commit added them unmerged)."""
    with catalog.connect() as conn:
        groups = staging.mergeable(conn, name)
    done = Merged()
    for files in groups.values():
        batch = _within(files, max_bytes)
        if len(batch) < min_files:
            done.ready += [f.path for f in batch]
            continue
        rows = to_table_schema(to_contract(name, _read(table, batch)), table)
        merged = write_data_files(name, table, rows, gateway)
        with catalog.begin() as conn:
            swapped = staging.replace(conn, [f.path for f in batch], merged)
        if not swapped:  # another committer took some (a lost lock): ours is an orphan
            log.warning("%s: staged files changed while merging; left as they were", name)
            continue
        done.ready += [f.path for f in merged]
        done.partitions += 1
        done.files_in += len(batch)
        done.files_out += len(merged)
        done.bytes_in += sum(f.file_bytes for f in batch)
    return done


def _within(files: Sequence[staging.StagedFile], max_bytes: int) -> list[staging.StagedFile]:
    """The oldest files whose bytes add up to at most `max_bytes` (at least one)."""
    out: list[staging.StagedFile] = []
    total = 0
    for f in files:
        if out and total + f.file_bytes > max_bytes:
            break
        out.append(f)
        total += f.file_bytes
    return out


def _read(table: Table, files: Sequence[staging.StagedFile]) -> pa.Table:
    """The files' rows, fetched `READERS` at a time: each is one GET, and on a busy gateway or a
    real object store the round trips, not the decoding, are what a merge waits on."""
    import pyarrow.parquet as pq

    def one(f: staging.StagedFile) -> pa.Table:
        with table.io.new_input(f.path).open() as stream:
            return pq.read_table(stream).replace_schema_metadata(None)

    with ThreadPoolExecutor(READERS, thread_name_prefix="fleetscope-merge") as pool:
        parts = list(pool.map(one, files))
    return pa.concat_tables(parts, promote_options="default")
