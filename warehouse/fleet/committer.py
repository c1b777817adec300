"""The table committer: in the gateway holding a table's commit lock, every staged file in one append.

Every gateway runs one; only the holder of a table's lock (warehouse.fleet.commit_lock) commits
it. Every `fleet.commit_interval_s` it:

1. settles commits a dead committer left unfinished (files assigned to a commit id, not marked):
   the commit id in a snapshot summary means it landed (mark the files committed), else the files
   go back to staged (warehouse.catalog.staging);
2. merges each partition's staged files into one data file (warehouse.fleet.merge), so a commit
   adds one file per partition whatever the number of gateways and flushes; a merge that fails
   leaves the files as they were and the pass commits them unmerged;
3. assigns the files the merge listed (merged or not; files staged while it merged wait for the
   next pass) of the table (all gateways') to a fresh commit id, in a transaction of its own;
4. appends them to the Iceberg table in ONE fast append (the files' statistics read from their
   Parquet footers, as pyiceberg's `add_files` does) with the commit id in the snapshot summary;
5. marks the files committed with the snapshot's id;
6. for each partition that append touched, merges committed files of one size tier into one once
   there are ten (warehouse.fleet.rewrite: one Iceberg overwrite deleting exactly those files), so
   a partition holds a few dozen files of growing size rather than one per commit; not on a day
   retention rolls up within a day (the roll-up records its files by path). Off unless the
   gateway passes `warehouse.raw_retention_days`.

A committer killed anywhere in 3-5 leaves the files assigned; step 1 of the next committer tells
from the snapshots whether the append landed, so a takeover commits each file exactly once. Only
one committer per table exists, so its appends meet no other gateway's; what can still conflict is
the upkeep's rewrite (compaction, retention) run by a worker: that is counted
(`fleetscope_iceberg_commit_conflicts_total` on the gateway's /metrics) and retried from fresh
metadata. At a clean stop the gateway runs one last pass for the tables whose lock it holds or
can take, so staged files never wait for a gateway that is gone.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from sqlalchemy import Engine

from fleetscope.contract import TABLES
from warehouse.catalog import staging
from warehouse.fleet.commit_lock import CommitterLease
from warehouse.fleet.merge import Merged, merge_staged
from warehouse.fleet.rewrite import rewrite, tiered
from warehouse.fleet.tables import FLUSH_PROPERTY, FleetTables
from warehouse.fleet.upkeep import EPOCH_DAY, Partition, compaction_allowed

if TYPE_CHECKING:
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

__all__ = ["CommitStats", "TableCommitter"]

MAX_FILES_PER_COMMIT = 2_000  # one manifest's worth; more wait for the next pass


@dataclass
class CommitStats:
    """Counters /metrics reads; only the committer thread updates them."""

    commits: int = 0
    files_committed: int = 0
    conflicts: int = 0  # CommitFailedException retries
    recovered: int = 0  # unfinished commits of a dead committer, settled
    files_merged: int = 0  # staged files replaced by a merge (step 2)
    merged_files: int = 0  # the files they were merged into
    tier_merges: int = 0  # committed files of one tier rewritten as one (step 6)
    tier_files_merged: int = 0
    merge_s: float = 0.0  # wall seconds in steps 2 and 6 (the merges), all passes
    pass_s: float = 0.0  # wall seconds in whole commit passes


class TableCommitter:
    def __init__(
        self,
        tables: FleetTables,
        catalog: Engine,
        *,
        interval_s: float,
        attempts: int = 20,
        gateway: str = "committer",
        merge: bool = True,
        raw_retention_days: int | None = None,
    ) -> None:
        self.tables = tables
        self.catalog = catalog
        self.interval_s = interval_s
        self.attempts = attempts
        self.gateway = gateway  # the merged files' writer is '<gateway>:merge' in the staging table
        self.merge = merge
        self.raw_retention_days = raw_retention_days  # None: no tiered merge (step 6)
        self.lease = CommitterLease(catalog)
        self.stats = CommitStats()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pass = threading.Lock()  # one pass at a time (the thread, `run_once` callers)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="fleetscope-committer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread, commit what is staged for the tables this gateway can hold, and give
        the locks up."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.run_once()
        self.lease.release_all()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.run_once()

    def run_once(self) -> int:
        """One pass over every contract table this gateway commits; returns the files committed."""
        committed = 0
        with self._pass:
            for name in TABLES:
                if not self.lease.hold(name):
                    continue
                try:
                    committed += self.commit(name)
                except Exception:
                    log.exception(
                        "commit of the staged files of %s failed; retried next pass", name
                    )
        return committed

    def commit(self, name: str) -> int:
        """Steps 1-6 of the module docstring for one table (the caller holds its lock); returns
        the staged files committed (a merged file counts as the files it replaced)."""
        started = time.perf_counter()
        try:
            return self._commit(name)
        finally:
            self.stats.pass_s += time.perf_counter() - started

    def _commit(self, name: str) -> int:
        table = self.tables.table(name)
        table.refresh()
        self._settle(name, table)
        merged = self._merge(name, table) if self.merge else None
        commit_id = uuid.uuid4().hex
        among = None if merged is None else merged.ready
        with self.catalog.begin() as conn:
            paths = staging.assign(conn, name, commit_id, MAX_FILES_PER_COMMIT, among)
        if not paths:
            return 0
        try:
            snapshot = self._append(name, table, paths, commit_id)
        except Exception:
            table.refresh()
            if _snapshot_of(table, commit_id) is None:
                with self.catalog.begin() as conn:
                    staging.unassign(conn, commit_id)
            raise  # if it landed after all, the next pass's settle marks it
        with self.catalog.begin() as conn:
            staging.mark_committed(conn, commit_id, *snapshot)
        self.stats.commits += 1
        self.stats.files_committed += len(paths)
        if self.raw_retention_days is not None:
            self._merge_tiers(name, table, snapshot[0])
        return len(paths) + (0 if merged is None else merged.files_in - merged.files_out)

    def _merge(self, name: str, table: Table) -> Merged | None:
        """Step 2; None when it failed (then every staged file is committed as it is)."""
        started = time.perf_counter()
        try:
            merged = merge_staged(self.catalog, name, table, f"{self.gateway}:merge")
        except Exception:
            log.exception("merging the staged files of %s failed; committed unmerged", name)
            return None
        finally:
            self.stats.merge_s += time.perf_counter() - started
        self.stats.files_merged += merged.files_in
        self.stats.merged_files += merged.files_out
        return merged

    def _merge_tiers(self, name: str, table: Table, snapshot_id: int) -> None:
        """Step 6 for each partition the append at `snapshot_id` touched."""
        from pyiceberg.exceptions import CommitFailedException, ValidationException

        assert self.raw_retention_days is not None
        now = datetime.now(UTC)
        for part in _touched(table, name, snapshot_id):
            if not compaction_allowed(part, self.raw_retention_days, now):
                continue  # retention rolls it up soon: its files must stay as recorded
            if not self.lease.hold(name):
                return
            tasks = tiered(list(table.scan(row_filter=part.row_filter()).plan_files()))
            if not tasks:
                continue
            started = time.perf_counter()
            try:
                replaced = rewrite(table, name, tasks)
            except (CommitFailedException, ValidationException):  # the upkeep rewrote first
                self.stats.conflicts += 1
                table.refresh()
                log.warning("tiered merge of %s %s met a concurrent rewrite", name, part)
                continue
            except Exception:
                log.exception("tiered merge of %s %s failed; retried next pass", name, part)
                table.refresh()
                continue
            finally:
                self.stats.merge_s += time.perf_counter() - started
            self.stats.tier_merges += 1
            self.stats.tier_files_merged += replaced

    def _settle(self, name: str, table: Table) -> None:
        with self.catalog.connect() as conn:
            unfinished = staging.unfinished(conn, name)
        for commit_id in unfinished:
            snapshot = _snapshot_of(table, commit_id)
            with self.catalog.begin() as conn:
                if snapshot is not None:
                    staging.mark_committed(conn, commit_id, *snapshot)
                else:
                    staging.unassign(conn, commit_id)
            self.stats.recovered += 1
            log.warning(
                "%s: commit %s of a previous committer %s",
                name,
                commit_id,
                "had landed; marked" if snapshot is not None else "had not landed; re-staged",
            )

    def _append(self, name: str, table: Table, paths: list[str], commit_id: str) -> tuple[int, int]:
        """One fast append of the files at `paths`; the new snapshot's (id, sequence number)."""
        from pyiceberg.exceptions import CommitFailedException
        from pyiceberg.table import _parquet_files_to_data_files

        data_files = list(_parquet_files_to_data_files(table.metadata, paths, table.io))
        for attempt in range(self.attempts):
            if not self.lease.hold(name):
                raise RuntimeError(f"lost the commit lock of {name} before committing")
            try:
                with table.transaction() as tx:
                    update = tx.update_snapshot(snapshot_properties={FLUSH_PROPERTY: commit_id})
                    with update.fast_append() as append:
                        for data_file in data_files:
                            append.append_data_file(data_file)
            except CommitFailedException:
                self.stats.conflicts += 1
                log.warning("Iceberg commit conflict on %s (attempt %d)", name, attempt + 1)
                table.refresh()
                if _snapshot_of(table, commit_id) is not None:
                    break
                time.sleep(random.uniform(0, min(2.0, 0.05 * 2**attempt)))  # full jitter
                continue
            break
        else:
            raise RuntimeError(f"Iceberg commit of {name} kept conflicting ({self.attempts} tries)")
        table.refresh()
        snapshot = _snapshot_of(table, commit_id)
        if snapshot is None:
            raise RuntimeError(f"commit {commit_id} of {name} is not in the table's snapshots")
        return snapshot


def _touched(table: Table, name: str, snapshot_id: int) -> list[Partition]:
    """The (day, cluster) partitions of the data files the snapshot `snapshot_id` added."""
    snapshot = table.metadata.snapshot_by_id(snapshot_id)
    if snapshot is None:
        return []
    seen = set()
    for manifest in snapshot.manifests(table.io):
        if manifest.added_snapshot_id != snapshot_id:
            continue
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            day, cluster = entry.data_file.partition[0], entry.data_file.partition[1]
            seen.add((int(day), None if cluster is None else str(cluster)))
    return [Partition(name, EPOCH_DAY + timedelta(days=d), c) for d, c in sorted(seen, key=str)]


def _snapshot_of(table: Table, commit_id: str) -> tuple[int, int] | None:
    """(id, sequence number) of the snapshot of `table` whose summary carries `commit_id`."""
    for snapshot in reversed(table.metadata.snapshots):
        summary = snapshot.summary
        if summary is not None and summary.get(FLUSH_PROPERTY) == commit_id:
            return int(snapshot.snapshot_id), int(snapshot.sequence_number or 0)
    return None
