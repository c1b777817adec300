"""Sealed Parquet segments and the manifest that says which of them are live.

This is the read path for every process other than the writer: DuckDB lets no second process open
a file a writer holds (design.md), so after each commit the writer publishes the committed rows as
immutable Parquet files under

    <segments_dir>/<table>/date=YYYY-MM-DD/<seq>-<uuid>.parquet

and `manifest.json` lists the live ones. Every file is written under a temporary name, fsynced and
`os.replace`d into place; the manifest is swapped the same way, so a reader that reads the
manifest sees one consistent set: never a partial file, never both a compacted file and its parts,
never neither. Files a swap removes are *retired*, not deleted: they stay on disk for
`warehouse.segment_grace_s` so a query planned on the previous manifest still finds them.

Only the server process mutates the store (the writer publishes; maintenance compacts, rolls up and
expires through `swap`); all mutations hold one lock. Readers use `read_manifest` only. This module
must never open the telemetry DuckDB file.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = 1


@dataclass(frozen=True)
class Segment:
    """One live Parquet file: `path` is relative to the segments folder."""

    path: str
    rows: int
    bytes: int

    @property
    def seq(self) -> int:
        return int(Path(self.path).name.split("-", 1)[0])

    @property
    def date(self) -> str:
        return Path(self.path).parent.name.removeprefix("date=")

    def to_json(self) -> dict[str, str | int]:
        return {"path": self.path, "rows": self.rows, "bytes": self.bytes}


@dataclass
class Manifest:
    """The live segments per table, what was retired when, and the roll-ups' input marks."""

    published_seq: int = 0
    tables: dict[str, list[Segment]] = field(default_factory=dict)
    retired: list[tuple[str, float]] = field(default_factory=list)
    marks: dict[str, str] = field(default_factory=dict)

    def live(self, table: str) -> list[Segment]:
        return list(self.tables.get(table, []))

    def by_date(self, table: str) -> dict[str, list[Segment]]:
        days: dict[str, list[Segment]] = {}
        for segment in self.tables.get(table, []):
            days.setdefault(segment.date, []).append(segment)
        return days

    def to_json(self) -> dict[str, object]:
        return {
            "format": MANIFEST_FORMAT,
            "published_seq": self.published_seq,
            "tables": {t: [s.to_json() for s in segs] for t, segs in self.tables.items()},
            "retired": [[path, at] for path, at in self.retired],
            "marks": self.marks,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Manifest:
        tables = data.get("tables", {})
        retired = data.get("retired", [])
        marks = data.get("marks", {})
        assert isinstance(tables, dict) and isinstance(retired, list) and isinstance(marks, dict)
        return cls(
            published_seq=int(str(data.get("published_seq", 0))),
            tables={
                t: [Segment(str(s["path"]), int(s["rows"]), int(s["bytes"])) for s in segs]
                for t, segs in tables.items()
            },
            retired=[(str(p), float(at)) for p, at in retired],
            marks={str(k): str(v) for k, v in marks.items()},
        )


def read_manifest(root: Path) -> Manifest:
    """The current manifest (empty when nothing was ever published). Safe from any process."""
    try:
        text = (root / MANIFEST_NAME).read_text(encoding="utf-8")
    except FileNotFoundError:
        return Manifest()
    return Manifest.from_json(json.loads(text))


def _fsync_replace(tmp: Path, final: Path) -> None:
    with tmp.open("rb") as handle:
        os.fsync(handle.fileno())
    os.replace(tmp, final)


def _day_of(table: pa.Table, ts_column: str) -> pa.Array:
    return pc.cast(table.column(ts_column), pa.date32())


class SegmentStore:
    """The server's handle on the segment folder; every mutation is one atomic manifest swap."""

    def __init__(
        self,
        root: Path,
        *,
        compression: str = "lz4",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.root = root
        self._compression = compression
        self._clock = clock
        self._lock = threading.Lock()
        root.mkdir(parents=True, exist_ok=True)
        self._manifest = read_manifest(root)

    # -- reading -------------------------------------------------------------------------
    def snapshot(self) -> Manifest:
        with self._lock:
            return Manifest.from_json(self._manifest.to_json())

    def path(self, segment: Segment | str) -> Path:
        return self.root / (segment.path if isinstance(segment, Segment) else segment)

    # -- writing files (not yet live) ----------------------------------------------------
    def new_name(self, table: str, date: str, seq: int) -> str:
        return f"{table}/date={date}/{seq:012d}-{uuid.uuid4().hex[:12]}.parquet"

    def write(self, table: str, data: pa.Table, seq: int, ts_column: str = "ts") -> list[Segment]:
        """Write `data` as one sealed file per UTC day of `ts_column`; they are not live yet."""
        if data.num_rows == 0:
            return []
        days = _day_of(data, ts_column)
        first, last = pc.min_max(days).values()
        if first == last:
            parts = [(str(first.as_py()), data)]
        else:
            parts = [
                (str(day.as_py()), data.filter(pc.equal(days, day))) for day in pc.unique(days)
            ]
        return [self.write_file(self.new_name(table, day, seq), part) for day, part in parts]

    def write_file(self, name: str, data: pa.Table) -> Segment:
        return self.write_parts(name, data.schema, [data])

    def write_parts(
        self,
        name: str,
        schema: pa.Schema,
        parts: Iterable[pa.Table],
        compression: str | None = None,
    ) -> Segment:
        """Stream tables into one sealed file (the compactor merges with bounded memory).

        Fresh segments use the store's codec, lz4 by default: it is on the writer's critical path
        and costs about half of zstd; the compactor passes zstd for the long-lived files.
        """
        final = self.root / name
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.with_name(f".{final.name}.tmp")
        rows = 0
        codec = compression or self._compression
        with pq.ParquetWriter(tmp, schema, compression=codec) as out:
            for part in parts:
                out.write_table(part)
                rows += part.num_rows
        _fsync_replace(tmp, final)
        return Segment(name, rows, final.stat().st_size)

    def discard(self, segments: Iterable[Segment]) -> None:
        """Remove files that never became live (a failed commit)."""
        for segment in segments:
            self.path(segment).unlink(missing_ok=True)

    # -- manifest swaps ------------------------------------------------------------------
    def publish(self, seq: int, segments: Mapping[str, list[Segment]]) -> None:
        """Make a committed flush's files live and advance the published sequence."""
        with self._lock:
            for table, added in segments.items():
                self._manifest.tables.setdefault(table, []).extend(added)
            self._manifest.published_seq = max(self._manifest.published_seq, seq)
            self._save()

    def swap(
        self,
        changes: Mapping[str, tuple[list[Segment], list[Segment]]],
        marks: Mapping[str, str] | None = None,
    ) -> bool:
        """Replace live segments per table (old -> new) in one swap; False if any old is gone.

        A False answer means another swap got there first; nothing changed and the caller's new
        files are its own to discard.
        """
        with self._lock:
            now = self._clock()
            for table, (old, _new) in changes.items():
                live = {s.path for s in self._manifest.tables.get(table, [])}
                if not {s.path for s in old} <= live:
                    return False
            for table, (old, new) in changes.items():
                gone = {s.path for s in old}
                kept = [s for s in self._manifest.tables.get(table, []) if s.path not in gone]
                self._manifest.tables[table] = kept + list(new)
                self._manifest.retired.extend((path, now) for path in sorted(gone))
            if marks:
                self._manifest.marks.update(marks)
            self._save()
            return True

    def purge_retired(self, grace_s: float) -> int:
        """Delete retired files older than the grace period; returns how many went."""
        with self._lock:
            cutoff = self._clock() - grace_s
            due = [(p, at) for p, at in self._manifest.retired if at <= cutoff]
            if not due:
                return 0
            self._manifest.retired = [(p, at) for p, at in self._manifest.retired if at > cutoff]
            self._save()
        for path, _at in due:
            self.path(path).unlink(missing_ok=True)
        return len(due)

    def reconcile(self, committed: Mapping[int, list[str]]) -> int:
        """After a restart: publish committed flushes the manifest missed, drop stray files.

        `committed` maps flush sequence numbers above `published_seq` to the segment names the
        writer recorded in the same transaction as the rows. Returns the number of segments
        published late.
        """
        late = 0
        with self._lock:
            for seq in sorted(committed):
                for name in committed[seq]:
                    file = self.root / name
                    if file.exists():
                        table = name.split("/", 1)[0]
                        self._manifest.tables.setdefault(table, []).append(
                            Segment(
                                name, pq.ParquetFile(file).metadata.num_rows, file.stat().st_size
                            )
                        )
                        late += 1
                self._manifest.published_seq = max(self._manifest.published_seq, seq)
            known = {s.path for segs in self._manifest.tables.values() for s in segs}
            known |= {p for p, _at in self._manifest.retired}
            for file in self.root.glob("*/date=*/*"):
                name = file.relative_to(self.root).as_posix()
                if name not in known:
                    file.unlink(missing_ok=True)
            self._save()
        return late

    def _save(self) -> None:
        final = self.root / MANIFEST_NAME
        tmp = final.with_name(f".{MANIFEST_NAME}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self._manifest.to_json()), encoding="utf-8")
        _fsync_replace(tmp, final)
