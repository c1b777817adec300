"""The oracle the trace decoder (analyzers/traces/load_fast.py) is held to: a pull parser over
the decompressed text, each element of `traceEvents` decoded with `json.JSONDecoder.raw_decode`
and reduced by the rules of `columns.event_sink`.

Why in tests: it was the product's second decoder (the one that named what is wrong, and the
loader without msgspec); issue 29 left one decoder in the product, and this one stays as the
slow, obviously-exact reference that the property tests compare the product's columns and
refusals with.
"""

from __future__ import annotations

import codecs
import io
import re
import sys
from pathlib import Path
from typing import Any

from analyzers.traces.columns import CHUNK_SIZE, ColumnBuilder, event_sink
from analyzers.traces.load import RawTrace
from analyzers.traces.trace_text import InflateBudget, regular_file_size
from fleetscope.errors import CorruptTraceError, TraceNestingError, TruncatedTraceError

__all__ = ["load_stdlib", "read_stdlib"]

_CHUNK = CHUNK_SIZE
# HTA's rank detection (hta/common/trace_file.py): the first `"rank":\s+(\d+)` of any line. A line
# cannot end inside the whitespace, so in a stream the whitespace must not hold a newline. Compiled
# on first use (re's cache).
_HTA_RANK_RE = r'"rank":[^\S\n]+(\d+)'
_WS = " \t\n\r"
_SKIP_WS = re.compile(r"[ \t\n\r]*").match
_NUMBER_CHARS = frozenset("0123456789.eE+-")
_GZIP_MAGIC = b"\x1f\x8b"


class _Reader:
    """Decompressed text of a file, delivered in chunks; knows when the input has ended."""

    def __init__(self, path: Path, chunk_size: int = _CHUNK) -> None:
        self.path = path
        self.chunk_size = chunk_size
        size = regular_file_size(path)
        try:
            with path.open("rb") as probe:
                magic = probe.read(2)
        except OSError as exc:
            raise CorruptTraceError(f"{path}: cannot read: {exc.strerror or exc}") from exc
        self._budget = InflateBudget(path, size) if magic == _GZIP_MAGIC else None
        # Closed by `close()`, which load_raw_trace calls in a `finally`.
        self._raw: io.BufferedIOBase
        if magic == _GZIP_MAGIC:
            import gzip  # the reference path only (the fast one has its own reader)

            self._raw = gzip.open(path, "rb")  # noqa: SIM115
        else:
            self._raw = path.open("rb")
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self.eof = False
        self.tail = ""  # the last bytes read, to find HTA's rank across chunk borders
        self.hta_rank: int | None = None

    def read(self) -> str:
        """The next text ('' only at the end of input: a chunk that ends inside a multi-byte
        character decodes to nothing, so reading goes on)."""
        text = ""
        while not text and not self.eof:
            text = self._read_chunk()
        if self.hta_rank is None:
            window = self.tail + text
            match = re.search(_HTA_RANK_RE, window)
            # A match that ends with the window may lose digits to the next chunk: wait for it.
            if match is not None and (match.end() < len(window) or self.eof):
                self.hta_rank = int(match.group(1))
            self.tail = window[-64:]
        return text

    def _read_chunk(self) -> str:
        import zlib  # the reference path only

        try:
            data = self._raw.read(self.chunk_size)
        except EOFError as exc:
            raise TruncatedTraceError(
                f"{self.path}: the gzip stream ends early (the file is truncated)"
            ) from exc
        except (OSError, zlib.error) as exc:
            raise CorruptTraceError(f"{self.path}: not a valid gzip file: {exc}") from exc
        if self._budget is not None:
            self._budget.count(len(data))
        try:
            text = self._decoder.decode(data, final=not data)
        except UnicodeDecodeError as exc:
            raise CorruptTraceError(f"{self.path}: not UTF-8 text: {exc}") from exc
        if not data:
            self.eof = True
        return text

    def close(self) -> None:
        self._raw.close()


class _Parser:
    """A tiny pull parser over the top-level object: keys and values, except `traceEvents`, whose
    elements are decoded one at a time."""

    def __init__(self, reader: _Reader) -> None:
        self.reader = reader
        self.buf = ""
        self.pos = 0
        # Imported here: a command whose files the fast path reads never needs it.
        import json

        self.decoder = json.JSONDecoder()
        self.decode_error = json.JSONDecodeError

    def _more(self) -> bool:
        text = self.reader.read()
        if not text:
            return False
        self.buf = self.buf[self.pos :] + text
        self.pos = 0
        return True

    def peek(self) -> str:
        """The next non-whitespace character ('' at the end of input)."""
        while True:
            buf, pos = self.buf, self.pos
            n = len(buf)
            # A run of whitespace is skipped in C: a file of nothing but spaces (a gzip bomb)
            # reaches its decompression budget in a second, not a character at a time.
            pos = _SKIP_WS(buf, pos).end()  # type: ignore[union-attr]  # `*` always matches
            self.pos = pos
            if pos < n:
                return buf[pos]
            if not self._more():
                return ""

    def expect(self, char: str, what: str) -> None:
        got = self.peek()
        if got != char:
            self._fail(f"expected {char!r} {what}, found {got!r}" if got else None)
        self.pos += 1

    def value(self, what: str) -> Any:
        """Decode one complete JSON value; reads more input until the value is whole."""
        self.peek()
        while True:
            try:
                obj, end = self.decoder.raw_decode(self.buf, self.pos)
            except RecursionError:
                raise TraceNestingError(
                    f"{self.reader.path}: not a Kineto trace: {what} nests deeper than the JSON "
                    f"decoder goes (about {sys.getrecursionlimit()} levels; an event nests 3)"
                ) from None
            except self.decode_error as exc:
                if self._more():
                    continue
                if exc.pos >= len(self.buf) - 1 or "Unterminated" in exc.msg:
                    self._fail(None)
                self._fail(f"{what}: {exc.msg} at character {exc.pos - self.pos} of the value")
            # A number may continue in the next chunk ("1" + "2", "0" + ".5", "1e" + "5").
            if (
                not self.reader.eof
                and (
                    end == len(self.buf)
                    or (type(obj) in (int, float) and self.buf[end] in _NUMBER_CHARS)
                )
                and self._more()
            ):
                continue
            self.pos = end
            return obj

    def _fail(self, message: str | None) -> None:
        path = self.reader.path
        if message is None:
            raise TruncatedTraceError(f"{path}: the JSON document ends early (truncated file)")
        raise CorruptTraceError(f"{path}: not a Kineto trace: {message}")


def _parse_events(parser: _Parser, cols: ColumnBuilder, path: Path) -> None:
    """Decode the elements of `traceEvents` one by one, straight into the columns."""
    parser.expect("[", "to open traceEvents")
    add = event_sink(cols)
    scan_once = parser.decoder.scan_once  # type: ignore[attr-defined]  # raw_decode minus a frame
    ws = _WS
    position = 0
    after_element = False
    while True:
        char = parser.peek()
        if char == "":
            parser._fail(None)
        if char == "]":
            parser.pos += 1
            break
        if after_element:
            if char != ",":
                parser._fail(
                    f"expected ',' or ']' after traceEvents[{position - 1}], found {char!r}"
                )
            parser.pos += 1
            after_element = False
            continue
        # Fast path: decode every whole event the buffer holds.
        buf, pos = parser.buf, parser.pos
        n = len(buf)
        while True:
            try:
                ev, end = scan_once(buf, pos)
            except (StopIteration, ValueError, RecursionError):  # the slow path names the error
                break
            if end >= n:
                break
            add(ev, position)
            position += 1
            pos = end
            after_element = True
            while pos < n and buf[pos] in ws:
                pos += 1
            if pos < n and buf[pos] == ",":
                pos += 1
                after_element = False
                while pos < n and buf[pos] in ws:
                    pos += 1
                if pos < n and buf[pos] != "]":
                    continue
            break
        parser.pos = pos
        if after_element or pos >= n or buf[pos] == "]":
            continue
        # Slow path: the element at `pos` is split across chunks, or broken.
        ev = parser.value(f"traceEvents[{position}]")
        add(ev, position)
        position += 1
        after_element = True
    cols.count = position


def read_stdlib(path: Path, chunk_size: int) -> tuple[dict[str, Any], ColumnBuilder, int | None]:
    """The file's top-level metadata, its events in columns and HTA's rank, by the reference
    rules; raises CorruptTraceError or TruncatedTraceError naming the file and what is wrong."""
    reader = _Reader(path, chunk_size)
    cols = ColumnBuilder(path)
    metadata: dict[str, Any] = {}
    seen_events = False
    try:
        parser = _Parser(reader)
        first = parser.peek()
        if first == "":
            raise CorruptTraceError(f"{path}: the file is empty")
        if first != "{":
            raise CorruptTraceError(
                f"{path}: not a Kineto trace: expected a JSON object, found {first!r}"
            )
        parser.pos += 1
        after_member = False
        while True:
            char = parser.peek()
            if char == "":
                parser._fail(None)
            if char == "}":
                parser.pos += 1
                break
            if after_member:
                if char != ",":
                    parser._fail(f"expected ',' or '}}' between top-level keys, found {char!r}")
                parser.pos += 1
                after_member = False
                continue
            after_member = True
            key = parser.value("a top-level key")
            if not isinstance(key, str):
                parser._fail(f"top-level key {key!r} is not a string")
            parser.expect(":", f"after key {key!r}")
            if key == "traceEvents":
                _parse_events(parser, cols, path)
                seen_events = True
            else:
                metadata[key] = parser.value(f"the value of {key!r}")
        if parser.peek() != "":
            parser._fail("extra data after the top-level object")
    finally:
        reader.close()
    if not seen_events:
        raise CorruptTraceError(f"{path}: not a Kineto trace: no 'traceEvents' array")
    return metadata, cols, reader.hta_rank


def load_stdlib(path: str | Path, *, chunk_size: int = CHUNK_SIZE) -> RawTrace:
    """`load_raw_trace` by the oracle: the same RawTrace the product's decoder must give."""
    path = Path(path)
    return RawTrace.of_columns(path, *read_stdlib(path, chunk_size))
