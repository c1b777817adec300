"""The ingest log: accepted batches made durable by one append and one fsync per group (issue 27).

Why: a flush (a DuckDB commit, a Parquet segment and a manifest swap, each with its fsync, plus the
ledger and catalog inserts) cost 97 % of the server's CPU, and at one batch a second per agent
nearly every request was a flush of its own. Like Prometheus's write-ahead log, the writer now
answers a batch once it is here, and turns the log into Parquet segments in the background
(`warehouse.storage.group_writer`), about once a second for every agent together.

On disk: `<root>/<segment:012d>.log` files, appended to in order; each record is framed as

    b"FSL1" | payload length (u32 LE) | CRC-32 of the payload (u32 LE) | payload
    payload = header length (u32 LE) | header JSON (batch id, table, rows, agent, digest, ...)
              | the rows as one Arrow IPC stream

A record's position is (segment, offset just past it). The writer records, in the same DuckDB
transaction as the rows, the position up to which the log is flushed, then rolls to a new segment
and deletes the older ones. On start, `replay` returns the records after that position: a record
cut short at a file's end (a crash mid-append) is torn: its bytes are copied to `quarantine/` and
the file truncated, with a warning; a record whose checksum or framing is wrong is copied to
`quarantine/` with an error and skipped. Nothing is dropped without a file and a log line.

One thread (the writer) uses an `IngestLog`; it never touches DuckDB or the segments.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pyarrow as pa

__all__ = ["IngestLog", "LogEntry", "LogPosition", "LogRecord"]

log = logging.getLogger(__name__)

MAGIC = b"FSL1"
_FRAME = struct.Struct("<4sII")  # magic, payload length, CRC-32
_HEADER_LEN = struct.Struct("<I")
_SUFFIX = ".log"


@dataclass(frozen=True, order=True)
class LogPosition:
    """A point in the log: just past a record, or (0, 0) for the log's start."""

    segment: int
    offset: int


START = LogPosition(0, 0)


@dataclass(frozen=True)
class LogEntry:
    """What the writer appends for one accepted batch: its rows and its ledger entry."""

    batch_id: str
    table: str
    rows: int
    agent: str
    agent_version: str
    digest: str
    received_at: datetime
    data: pa.Table


@dataclass(frozen=True)
class LogRecord:
    """An entry read back or just appended, with the position just past it."""

    entry: LogEntry
    end: LogPosition


def encode(entry: LogEntry) -> bytes:
    """One framed record; cost bounded by the batch's bytes."""
    header = json.dumps(
        {
            "batch_id": entry.batch_id,
            "table": entry.table,
            "rows": entry.rows,
            "agent": entry.agent,
            "agent_version": entry.agent_version,
            "digest": entry.digest,
            "received_at": entry.received_at.isoformat(),
        },
        separators=(",", ":"),
    ).encode()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, entry.data.schema) as stream:
        stream.write_table(entry.data)
    payload = b"".join((_HEADER_LEN.pack(len(header)), header, sink.getvalue().to_pybytes()))
    return _FRAME.pack(MAGIC, len(payload), zlib.crc32(payload)) + payload


def decode(payload: bytes) -> LogEntry:
    (header_len,) = _HEADER_LEN.unpack_from(payload)
    start = _HEADER_LEN.size
    header = json.loads(payload[start : start + header_len])
    data = pa.ipc.open_stream(pa.py_buffer(payload[start + header_len :])).read_all()
    return LogEntry(
        batch_id=str(header["batch_id"]),
        table=str(header["table"]),
        rows=int(header["rows"]),
        agent=str(header["agent"]),
        agent_version=str(header["agent_version"]),
        digest=str(header["digest"]),
        received_at=datetime.fromisoformat(header["received_at"]),
        data=data,
    )


class IngestLog:
    """The segment files under `root`; see the module docstring."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.quarantine_dir = root / "quarantine"
        root.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = None
        self._segment = 0
        self._offset = 0
        self.fsyncs = 0  # fsync calls made (group syncs, folder syncs, quarantine copies)

    # -- reading at start ------------------------------------------------------------------
    def segments(self) -> list[int]:
        return sorted(int(p.name.removesuffix(_SUFFIX)) for p in self.root.glob(f"*{_SUFFIX}"))

    def replay(self, after: LogPosition) -> list[LogRecord]:
        """The records past `after`, oldest first, repairing torn tails (see module docstring).
        Call before the first `append`."""
        records: list[LogRecord] = []
        for segment in self.segments():
            if segment < after.segment:
                continue
            for record in self._read_segment(segment):
                if record.end > after:
                    records.append(record)
        return records

    def _read_segment(self, segment: int) -> Iterator[LogRecord]:
        path = self._path(segment)
        blob = path.read_bytes()
        offset = 0
        while offset < len(blob):
            if len(blob) - offset < _FRAME.size:
                self._cut_torn_tail(segment, blob, offset)
                return
            magic, length, crc = _FRAME.unpack_from(blob, offset)
            end = offset + _FRAME.size + length
            if magic != MAGIC:
                self._quarantine(segment, offset, blob[offset:], "no record frame here")
                return  # the framing is lost: the rest of the file is quarantined
            if end > len(blob):
                self._cut_torn_tail(segment, blob, offset)
                return
            payload = blob[offset + _FRAME.size : end]
            if zlib.crc32(payload) != crc:
                self._quarantine(segment, offset, blob[offset:end], "checksum mismatch")
            else:
                try:
                    entry = decode(payload)
                except Exception as exc:  # a checksummed record we cannot read is still kept
                    self._quarantine(segment, offset, blob[offset:end], f"undecodable: {exc}")
                else:
                    yield LogRecord(entry, LogPosition(segment, end))
            offset = end

    def _cut_torn_tail(self, segment: int, blob: bytes, offset: int) -> None:
        kept = self._keep(segment, offset, blob[offset:], "torn")
        with open(self._path(segment), "r+b") as handle:
            handle.truncate(offset)
            os.fsync(handle.fileno())
            self.fsyncs += 1
        log.warning(
            "ingest log %s: truncated a torn record at byte %d (%d bytes, copied to %s); a batch "
            "cut short by a crash was never acknowledged",
            self._path(segment).name,
            offset,
            len(blob) - offset,
            kept,
        )

    def _quarantine(self, segment: int, offset: int, raw: bytes, why: str) -> None:
        kept = self._keep(segment, offset, raw, "bad")
        log.error(
            "ingest log %s: record at byte %d is unreadable (%s); %d bytes quarantined in %s",
            self._path(segment).name,
            offset,
            why,
            len(raw),
            kept,
        )

    def _keep(self, segment: int, offset: int, raw: bytes, kind: str) -> Path:
        self.quarantine_dir.mkdir(exist_ok=True)
        kept = self.quarantine_dir / f"{segment:012d}-{offset}.{kind}"
        with open(kept, "wb") as handle:
            handle.write(raw)
            handle.flush()
            os.fsync(handle.fileno())
            self.fsyncs += 1
        return kept

    def keep_refused(self, record: LogRecord) -> Path:
        """Copy a record the store refused on its data to `quarantine/` (never dropped)."""
        return self._keep(record.end.segment, record.end.offset, encode(record.entry), "refused")

    # -- appending -------------------------------------------------------------------------
    @property
    def position(self) -> LogPosition:
        """Just past the last record appended (or where the next one goes)."""
        return LogPosition(self._segment, self._offset)

    def roll(self) -> None:
        """Continue in a new segment file (after a flush, and at start: a replayed file is never
        appended to)."""
        self.close()
        existing = self.segments()
        self._segment = max([self._segment, *existing]) + 1
        self._fd = os.open(self._path(self._segment), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        self._offset = 0
        _fsync_dir(self.root)
        self.fsyncs += 1

    def append(self, entries: Sequence[LogEntry]) -> list[LogRecord]:
        """Write the entries (not yet durable: `sync`); on failure nothing of them stays."""
        if self._fd is None:
            self.roll()
        assert self._fd is not None
        frames = [encode(entry) for entry in entries]
        start = self._offset
        records = []
        end = start
        for entry, frame in zip(entries, frames, strict=True):
            end += len(frame)
            records.append(LogRecord(entry, LogPosition(self._segment, end)))
        try:
            _write_all(self._fd, b"".join(frames))
        except BaseException:
            self._truncate(start)
            raise
        self._offset = end
        return records

    def sync(self) -> None:
        """The group's one fsync: every record appended so far is durable after it."""
        if self._fd is not None:
            try:
                os.fdatasync(self._fd)
                self.fsyncs += 1
            except BaseException:
                # What was written may or may not be on disk; the acks are refused (503), so the
                # records must not outlive this call either: the agents retry them.
                self._truncate(self._last_synced)
                raise
            self._last_synced = self._offset

    _last_synced = 0

    def _truncate(self, offset: int) -> None:
        if self._fd is not None:
            try:
                os.ftruncate(self._fd, offset)
                os.lseek(self._fd, offset, os.SEEK_SET)
            except OSError:
                log.exception("could not cut the ingest log back to byte %d", offset)
            self._offset = offset

    def drop_before(self, segment: int) -> int:
        """Delete the segment files older than `segment` (their records are flushed)."""
        dropped = 0
        for old in self.segments():
            if old < segment:
                self._path(old).unlink(missing_ok=True)
                dropped += 1
        return dropped

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            self._last_synced = 0

    def _path(self, segment: int) -> Path:
        return self.root / f"{segment:012d}{_SUFFIX}"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
