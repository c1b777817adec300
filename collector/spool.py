"""The on-disk spool: every sealed batch waits here, one file each, until ingest answers 202.

Layout: `<spool_dir>/<seq:016d>.<table>.<batch_id>.arrow`, where `seq` orders batches (replayed
oldest first) and `batch_id` (uuid4 hex) is chosen once, when the batch is sealed, so every retry
of it, even after an agent restart, carries the same id and ingest can drop duplicates. Writes are
atomic: a `.tmp-` file, fsync, rename, fsync of the folder (a crash leaves either the whole batch or
a `.tmp-` file, which start-up deletes). Bounded: past `max_bytes` the oldest batches are
dropped, and counted, so a week-long ingest outage cannot fill the host's disk; a disk that is
full anyway (ENOSPC on a write) drops the oldest the same way, and the agent keeps collecting. Batches ingest
refused as malformed move to `<spool_dir>/dead/` with a `.reason` file next to them. Spooled
batches are job data: files 0600 in 0700 folders whatever the umask (fleetscope.private).

Must never: delete a batch that was not acknowledged, except to honour `max_bytes` or a full
disk (counted in `dropped`), or hand out batches out of order.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fleetscope.private import private_dir, tighten

log = logging.getLogger(__name__)

_SUFFIX = ".arrow"
# Bodies of batches put by this process and not yet shipped are also kept in memory, up to this
# many bytes, so the shipper sends them without reading the file back (the file is what makes a
# batch durable; the copy only saves an open and a read per batch).
_CACHE_BYTES = 8 * 1024 * 1024
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


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
        private_dir(self.dead_dir)
        tighten(private_dir(root))
        for leftover in root.glob(".tmp-*"):
            leftover.unlink(missing_ok=True)
        batches = self._scan()
        self._batches: list[SpooledBatch] = batches
        self._bytes = sum(b.size for b in batches)
        self._next_seq = batches[-1].seq + 1 if batches else 1
        self._bodies: dict[int, bytes] = {}  # seq -> body, at most _CACHE_BYTES in all
        self._cached = 0

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
        return self.put_many([(table, body)])[0]

    def put_many(self, sealed: Sequence[tuple[str, bytes]]) -> list[SpooledBatch]:
        """Store batches sealed together (a tick's gpu and host batches), each durably under a
        fresh batch id, in order; returns them once every one is durable.

        Each file is written and fsynced as `put` does, then all are renamed and the folder is
        fsynced once, not once per batch (one folder sync per sealing tick). A crash
        before the return leaves each batch whole or as a `.tmp-` file, as before."""
        with self._lock:
            staged: list[tuple[Path, SpooledBatch, bytes]] = []
            for table, body in sealed:
                seq = self._next_seq
                self._next_seq += 1
                batch_id = uuid.uuid4().hex
                name = f"{seq:016d}.{table}.{batch_id}{_SUFFIX}"
                tmp = self.root / f".tmp-{name}"
                if not self._write(tmp, body, table):
                    continue  # the disk is full with nothing of ours left to drop
                batch = SpooledBatch(seq, table, batch_id, self.root / name, len(body))
                staged.append((tmp, batch, body))
            for tmp, batch, _ in staged:
                os.replace(tmp, batch.path)
            if staged:
                _fsync_dir(self.root)
            for _, batch, body in staged:
                self._batches.append(batch)
                self._bytes += batch.size
                if self._cached + batch.size <= _CACHE_BYTES:
                    self._bodies[batch.seq] = body
                    self._cached += batch.size
                while self._bytes > self.max_bytes and len(self._batches) > 1:
                    self._drop_oldest(f"spool over agent.spool_max_bytes ({self.max_bytes} bytes)")
            return [batch for _, batch, _ in staged]

    def _write(self, tmp: Path, body: bytes, table: str) -> bool:
        """Write and fsync `tmp`. On a full disk (ENOSPC, EDQUOT) drop the oldest spooled batch
        and try again, as at the size cap: the newest data is worth most, and an agent that
        raised here stopped collecting for good. False when the disk is full and no batch is
        left to drop (something else filled it): the new batch is dropped, counted the same."""
        while True:
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "wb") as handle:
                    handle.write(body)
                    handle.flush()
                    os.fsync(handle.fileno())
                return True
            except OSError as exc:
                tmp.unlink(missing_ok=True)
                if exc.errno not in _DISK_FULL:
                    raise
                if not self._batches:
                    self.dropped += 1
                    log.error(
                        "spool disk full (%s) and no spooled batch left to drop: dropped the "
                        "new %s batch of %d bytes (%d dropped since start)",
                        exc.strerror,
                        table,
                        len(body),
                        self.dropped,
                    )
                    return False
                self._drop_oldest(f"spool disk full ({exc.strerror})")

    def _drop_oldest(self, why: str) -> None:
        oldest = self._batches.pop(0)
        self._uncache(oldest)
        oldest.path.unlink(missing_ok=True)
        self._bytes -= oldest.size
        self.dropped += 1
        log.warning(
            "%s: dropped the oldest batch %s (%d dropped since start)",
            why,
            oldest.path.name,
            self.dropped,
        )

    def pending(self) -> list[SpooledBatch]:
        with self._lock:
            return list(self._batches)

    def oldest(self) -> SpooledBatch | None:
        with self._lock:
            return self._batches[0] if self._batches else None

    def _uncache(self, batch: SpooledBatch) -> None:
        if self._bodies.pop(batch.seq, None) is not None:
            self._cached -= batch.size

    def read(self, batch: SpooledBatch) -> bytes | None:
        """The batch's body, or None if the size cap dropped it meanwhile."""
        with self._lock:
            body = self._bodies.get(batch.seq)
        if body is not None:
            return body
        try:
            return batch.path.read_bytes()
        except FileNotFoundError:
            return None

    def _forget(self, batch: SpooledBatch) -> bool:
        self._uncache(batch)
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
                reason_path = self.dead_dir / (batch.path.name + ".reason")
                fd = os.open(reason_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "w") as handle:
                    handle.write(reason + "\n")

    @property
    def depth(self) -> int:
        with self._lock:
            return len(self._batches)

    @property
    def bytes(self) -> int:
        with self._lock:
            return self._bytes
