"""The orphan-file sweep: files under a table's location that its metadata no longer reaches.

Why: pyiceberg 0.12 has no orphan-file removal (apache/iceberg-python#1200 is open), and its
`expire_snapshots` only drops snapshots from the metadata, never a file. So without a sweep the
object store keeps, forever, every file of a lost commit attempt (pyiceberg re-writes the manifest and manifest list on
each retry of a conflicting commit, warehouse.fleet.committer), every data file a gateway's
staging transaction wrote and then rolled back,
every small file compaction replaced and every raw partition retention dropped, once the
snapshots that still named them have expired, and every metadata file past the metadata log.

Reachable, as in Iceberg's own DeleteOrphanFiles action: the current metadata file and those in
its metadata log, and for every snapshot still in the metadata its manifest list, its manifests
and the live data files they list, plus statistics files. Everything else under the table's
location whose object is older than the safety age is deleted. The safety age protects writes in
flight: a gateway writes a data file, then its manifest, then commits; until then the files are
unreferenced. `ORPHAN_MIN_AGE` is Iceberg's default (3 days), far above that. A gateway's staged
files wait for the table's committer (seconds, see warehouse.catalog.staging), but a committer
that cannot commit (S3 or the catalog down for days) must not lose them to the sweep: every file
the staging table lists as not committed yet is kept, whatever its age, like a reached one. The
small files a committer merged (warehouse.fleet.merge) leave the staging table then, and go
with the safety age. This module must never delete a file the metadata reaches or a staged one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

# Iceberg's DeleteOrphanFiles default `older_than`: 3 days
# (https://iceberg.apache.org/docs/latest/maintenance/#delete-orphan-files).
ORPHAN_MIN_AGE = timedelta(days=3)


@dataclass(frozen=True)
class StoredFile:
    """One object under a table's location: its full URI and when the store last wrote it."""

    uri: str
    modified: datetime


def reachable(table: Table) -> set[str]:
    """URIs of every file the table's metadata reaches (see the module docstring)."""
    meta = table.metadata
    out = {table.metadata_location, *(entry.metadata_file for entry in meta.metadata_log)}
    out |= {s.statistics_path for s in meta.statistics}
    out |= {s.statistics_path for s in meta.partition_statistics}
    manifests = {}
    for snapshot in meta.snapshots:
        out.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(table.io):
            manifests[manifest.manifest_path] = manifest
    out |= set(manifests)
    for manifest in manifests.values():
        out |= {e.data_file.file_path for e in manifest.fetch_manifest_entry(table.io)}
    return out


def staged(table: Table) -> set[str]:
    """URIs of the table's data files staged and not committed yet (warehouse.catalog.staging),
    read from the PostgreSQL of the table's SQL catalog; none where it has no staging table."""
    from sqlalchemy.exc import DBAPIError

    from warehouse.catalog import staging

    engine = getattr(table.catalog, "engine", None)
    if engine is None:
        return set()
    try:
        with engine.connect() as conn:
            return staging.uncommitted(conn, table.name()[-1])
    except DBAPIError:  # no gateway made the staging table yet: nothing staged
        return set()


def stored(table: Table) -> list[StoredFile]:
    """Every object under the table's location, listed through the table's own FileIO."""
    from pyarrow.fs import FileSelector, FileType

    io = table.io
    scheme, netloc, path = io.parse_location(table.location())  # type: ignore[attr-defined]
    fs = io.fs_by_scheme(scheme, netloc)  # type: ignore[attr-defined]
    infos = fs.get_file_info(FileSelector(path, recursive=True, allow_not_found=True))
    return [
        StoredFile(f"{scheme}://{info.path}", info.mtime.astimezone(UTC))
        for info in infos
        if info.type == FileType.File and info.mtime is not None
    ]


def orphans(table: Table, min_age: timedelta, now: datetime) -> list[str]:
    """URIs under the table's location that nothing reaches, written before `now - min_age`."""
    listed = stored(table)
    table.refresh()  # after the listing: a file committed since is reached, or young
    known = reachable(table) | staged(table)
    cutoff = now - min_age
    return sorted(f.uri for f in listed if f.uri not in known and f.modified < cutoff)


def sweep(table: Table, min_age: timedelta, now: datetime) -> list[str]:
    """Delete `orphans`; returns what it deleted."""
    if min_age < timedelta(0):
        raise ValueError(f"orphan safety age {min_age} is negative")
    found = orphans(table, min_age, now)
    for uri in found:
        table.io.delete(uri)
    if found:
        log.info("%s: deleted %d orphan files", table.name(), len(found))
    return found
