"""A trace file's text in chunks for load_fast.py: inflated (zlib-ng where installed), checked as
UTF-8, with HTA's rank found on the way."""

from __future__ import annotations

import codecs
import gzip
import io
import os
import re
import stat
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import cast

from fleetscope.errors import (
    CorruptTraceError,
    NotRegularFileError,
    TraceBudgetError,
    TruncatedTraceError,
)

# A gzip trace's decompression budget. Kineto traces inflate 13-30x, JSON text rarely passes 50x,
# deflate's ceiling (runs of one byte) is ~1,030x. So a file may inflate to MAX_INFLATE_RATIO
# times its size (at least INFLATE_FLOOR_BYTES: a tiny file is not judged by its header), never
# past MAX_TEXT_BYTES.
MAX_INFLATE_RATIO = 200
INFLATE_FLOOR_BYTES = 64 << 20
MAX_TEXT_BYTES = 16 << 30

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
)


def regular_file_size(path: Path) -> int:
    """The size of `path`, a regular file; refused before it is opened otherwise (opening a
    FIFO blocks until a writer comes, `/dev/zero` never ends): NotRegularFileError, or
    CorruptTraceError when nothing is there."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise CorruptTraceError(f"{path}: no such file") from None
    except OSError as exc:
        raise CorruptTraceError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a regular file")
        raise NotRegularFileError(
            f"{path}: {kind}, not a regular file: the trace command reads regular files only"
        )
    return info.st_size


class InflateBudget:
    """Counts the text a gzip file inflated to; raises TraceBudgetError past its budget."""

    def __init__(self, path: Path, compressed_bytes: int) -> None:
        self.path = path
        self.limit = min(
            MAX_TEXT_BYTES, max(INFLATE_FLOOR_BYTES, MAX_INFLATE_RATIO * compressed_bytes)
        )
        self.inflated = 0

    def count(self, size: int) -> None:
        self.inflated += size
        if self.inflated > self.limit:
            raise TraceBudgetError(
                f"{self.path}: refused: the gzip file inflates past {self.limit >> 20} MiB of "
                f"text (over {MAX_INFLATE_RATIO}x its size or {MAX_TEXT_BYTES >> 30} GiB; a "
                "decompression bomb, or not a trace)"
            )


# zlib-ng's gzip reader (the `server` extra): ~3x faster than stdlib gzip, its own error type.
_open_gzip: Callable[[Path, str], io.BufferedIOBase]
_GZIP_READ_ERRORS: tuple[type[Exception], ...] = (OSError, zlib.error)
try:
    from zlib_ng import gzip_ng, zlib_ng

    _open_gzip = gzip_ng.open
    _GZIP_READ_ERRORS += (cast(type[Exception], zlib_ng.error),)
except ModuleNotFoundError:  # pragma: no cover - exercised where zlib-ng is not installed
    _open_gzip = gzip.GzipFile
_GZIP_MAGIC = b"\x1f\x8b"
# HTA's rank detection (hta/common/trace_file.py): the first `"rank":\s+(\d+)` of any line.
_HTA_RANK_RE = re.compile(rb'"rank":[ \t\r\x0b\x0c]+(\d+)')
_RANK_KEY = b'"rank":'
_MAY_MATCH_ON = re.compile(rb"[ \t\r\x0b\x0c]*\d*")


class TextSource:
    """Decompressed bytes of a file in chunks, checked as UTF-8 (the C pass does not check the
    strings it skips)."""

    def __init__(self, path: Path, chunk_size: int) -> None:
        size = regular_file_size(path)
        self.path = path
        try:
            with path.open("rb") as probe:
                gz = probe.read(2) == _GZIP_MAGIC
            self._raw: io.BufferedIOBase = _open_gzip(path, "rb") if gz else path.open("rb")
        except OSError as exc:
            raise CorruptTraceError(f"{path}: cannot read: {exc.strerror or exc}") from exc
        self._budget = InflateBudget(path, size) if gz else None
        self._utf8 = codecs.getincrementaldecoder("utf-8")("strict")
        self.chunk_size = chunk_size
        self.eof = False
        self.hta_rank: int | None = None
        self._tail = b""

    def read(self) -> bytes:
        """The next chunk (b"" at the end), or a TraceError that says why not."""
        try:
            data = self._raw.read(self.chunk_size)
        except EOFError as exc:
            raise TruncatedTraceError(
                f"{self.path}: the gzip stream ends early (the file is truncated)"
            ) from exc
        except _GZIP_READ_ERRORS as exc:
            kind = "not a valid gzip file" if self._budget is not None else "cannot read"
            raise CorruptTraceError(f"{self.path}: {kind}: {exc}") from exc
        if self._budget is not None:
            self._budget.count(len(data))
        self.eof = not data
        try:  # final, at the end: a multi-byte character cut by the end is an error
            if self.eof or not data.isascii() or self._utf8.getstate()[0]:
                self._utf8.decode(data, final=self.eof)
        except UnicodeDecodeError as exc:
            raise CorruptTraceError(f"{self.path}: not UTF-8 text: {exc}") from exc
        if self.hta_rank is None:
            self._find_rank(data)
        return data

    def _find_rank(self, data: bytes) -> None:
        """HTA's rank: its regex's first match in the file, whatever the chunks. Only text with the
        key is searched (a regex over every chunk slows the load); kept for the next chunk: a last
        key followed by only whitespace and digits (up to 64 KiB), else what a key can straddle."""
        if _RANK_KEY in data or _RANK_KEY in self._tail + data[: len(_RANK_KEY)]:
            text = self._tail + data
            match = _HTA_RANK_RE.search(text)
            if match is not None and match.end() < len(text):
                self.hta_rank = int(match.group(1))
                return
            key = text.rfind(_RANK_KEY)
            if len(text) - key < 1 << 16 and _MAY_MATCH_ON.fullmatch(text, key + len(_RANK_KEY)):
                self._tail = text[key:]
                return
        self._tail = (self._tail + data[1 - len(_RANK_KEY) :])[1 - len(_RANK_KEY) :]

    def close(self) -> None:
        self._raw.close()
