"""The on-disk spool: every sealed batch waits here, one file each, until ingest answers 202.

Layout: `<spool_dir>/<seq:016d>.<table>.<batch_id>.arrow`, where `seq` orders batches (replayed
oldest first) and `batch_id` (uuid4 hex) is chosen once, when the batch is sealed, so every retry
of it, even after an agent restart, carries the same id and ingest can drop duplicates. Writes are
atomic: a `.tmp-` file, fsync, rename, fsync of the folder (a crash leaves either the whole batch or
a `.tmp-` file, which start-up deletes). Bounded: past `max_bytes` the oldest batches are
dropped, and counted, so a week-long ingest outage cannot fill the host's disk. Batches ingest
refused as malformed move to `<spool_dir>/dead/` with a `.reason` file next to them.

Must never: delete a batch that was not acknowledged, except to honour `max_bytes` (counted in
`dropped`), or hand out batches out of order.
"""

from __future__ import annotations

import os
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

_SUFFIX = ".arrow"


@dataclass(frozen=True, order=True)
class SpooledBatch:
    seq: int
    table: str
    batch_id: str
    path: Path
    size: int


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Spool:
    def __init__(self, root: Path, *, max_bytes: int) -> None:
        self.root = root
        self.dead_dir = root / "dead"
        self.max_bytes = max_bytes
        self.dropped = 0
        self._lock = threading.Lock()
        self.dead_dir.mkdir(parents=True, exist_ok=True)
        for leftover in root.glob(".tmp-*"):
            leftover.unlink(missing_ok=True)
        batches = self._scan()
        self._batches: list[SpooledBatch] = batches
        self._bytes = sum(b.size for b in batches)
        self._next_seq = batches[-1].seq + 1 if batches else 1

    def _scan(self) -> list[SpooledBatch]:
        found: list[SpooledBatch] = []
        for entry in os.scandir(self.root):
            if not entry.is_file() or not entry.name.endswith(_SUFFIX):
                continue
            parts = entry.name[: -len(_SUFFIX)].split(".")
            if len(parts) != 3 or not parts[0].isdigit():
                continue
            found.append(
                SpooledBatch(
                    int(parts[0]), parts[1], parts[2], Path(entry.path), entry.stat().st_size
                )
            )
        return sorted(found)

    def put(self, table: str, body: bytes) -> SpooledBatch:
        """Store a sealed batch durably under a fresh batch id; returns it."""
        with self._lock:
            seq = self._next_seq
            self._next_seq += 1
            batch_id = uuid.uuid4().hex
            name = f"{seq:016d}.{table}.{batch_id}{_SUFFIX}"
            tmp = self.root / f".tmp-{name}"
            with tmp.open("wb") as handle:
                handle.write(body)
                handle.flush()
                os.fsync(handle.fileno())
            path = self.root / name
            os.replace(tmp, path)
            _fsync_dir(self.root)
            batch = SpooledBatch(seq, table, batch_id, path, len(body))
            self._batches.append(batch)
            self._bytes += batch.size
            while self._bytes > self.max_bytes and len(self._batches) > 1:
                oldest = self._batches.pop(0)
                oldest.path.unlink(missing_ok=True)
                self._bytes -= oldest.size
                self.dropped += 1
            return batch

    def pending(self) -> list[SpooledBatch]:
        with self._lock:
            return list(self._batches)

    def oldest(self) -> SpooledBatch | None:
        with self._lock:
            return self._batches[0] if self._batches else None

    def read(self, batch: SpooledBatch) -> bytes | None:
        """The batch's body, or None if the size cap dropped it meanwhile."""
        try:
            return batch.path.read_bytes()
        except FileNotFoundError:
            return None

    def _forget(self, batch: SpooledBatch) -> bool:
        if batch in self._batches:
            self._batches.remove(batch)
            self._bytes -= batch.size
            return True
        return False

    def ack(self, batch: SpooledBatch) -> None:
        """Ingest stored it (202): delete it."""
        with self._lock:
            self._forget(batch)
            batch.path.unlink(missing_ok=True)

    def dead_letter(self, batch: SpooledBatch, reason: str) -> None:
        """Ingest refused it as malformed (4xx): keep it aside for a human, never retry it."""
        with self._lock:
            if self._forget(batch) and batch.path.exists():
                os.replace(batch.path, self.dead_dir / batch.path.name)
                (self.dead_dir / (batch.path.name + ".reason")).write_text(reason + "\n")

    @property
    def depth(self) -> int:
        with self._lock:
            return len(self._batches)

    @property
    def bytes(self) -> int:
        with self._lock:
            return self._bytes
