"""The trace decoder: the C pass (_kineto_columns.c) turns whole events at the head of the text
into column blocks and stops at the first element it does not take (an odd shape such as a string
stream id or a null `args`, malformed JSON, an element the text cut). `_Events.walk` decodes that
element and the rest of its text with Python's json and `columns.event_sink` (a bad element is
named in one line); then the C pass goes on. Tests hold it to the stdlib oracle (stdlib_oracle.py).
"""

from __future__ import annotations

import codecs
import contextlib
import json
import re
import sys
from pathlib import Path
from typing import Any, NoReturn

try:
    from analyzers.traces import _kineto_columns
except ImportError as missing:  # the install skipped it (pyproject.toml: optional for the agent)
    raise ImportError(
        "analyzers.traces needs its C extension, built when fleetscope is installed: install a C "
        "compiler and the Python headers (Debian: gcc python3-dev), then reinstall fleetscope"
    ) from missing
from analyzers.traces.columns import ColumnBuilder, event_sink
from analyzers.traces.trace_text import TextSource
from fleetscope.errors import CorruptTraceError, TraceNestingError, TruncatedTraceError

_decode_columns = _kineto_columns.decode_events  # tests and bench/trace_stages.py replace it

_KEY = b'"traceEvents"'
_AFTER_KEY = re.compile(rb"[ \t\n\r]*(:?)[ \t\n\r]*")
_SKIP_WS = re.compile(r"[ \t\n\r]*").match
_JSON_WS = b" \t\n\r"
# The most text buffered while looking for the key, or for the end of one element: a file past
# it is refused (no Kineto event or metadata block comes near it).
_MAX_BUFFER = 64 << 20
_EXTRA_DATA = "extra data after the top-level object"
_CLOSE = ord("]")


def decode(path: Path, cols: ColumnBuilder, chunk_size: int) -> tuple[dict[str, Any], int | None]:
    """Fill `cols` from the file; return (top-level metadata, HTA's rank). Raises a TraceError
    subclass that names the file and what is wrong."""
    with contextlib.closing(TextSource(path, chunk_size)) as source:
        text = _Text(2 * source.chunk_size + 64)
        metadata, opening = _head(source, text, path)
        # From here on the text's first byte stands for the `[` or `,` before the next element;
        # it is `]` once the array is closed.
        text.drop(opening)
        events = _Events(cols, path)
        # An element the walk found unfinished is read again only once the text has doubled:
        # each reading scans it whole, so one per chunk was quadratic in its length.
        again_at = 0
        while text.data[0] != _CLOSE:
            if not source.eof:
                text.append(source.read())
                if text.length < again_at:
                    continue
            text.drop(events.decode(text))
            # Where the C pass stopped short of a chunk from the end, the next chunk comes first.
            if text.data[0] != _CLOSE and (source.eof or text.length >= source.chunk_size):
                text.drop(events.walk(text, eof=source.eof))
                again_at = min(2 * text.length, _MAX_BUFFER)
            if text.length > _MAX_BUFFER:
                what = f"traceEvents[{events.position}] is longer than {_MAX_BUFFER >> 20} MiB"
                raise _refuse(path, what)
        while not source.eof and text.length <= _MAX_BUFFER:
            text.append(source.read())
        cols.count = events.position
        _members_after(bytes(text.data[1 : text.length]), metadata, path)
        return metadata, source.hta_rank


class _Text:
    """The text not decoded yet, at the start of one bytearray allocated once (it grows only for a
    longer element). Not `del buf[:cut]; buf += chunk`: CPython gives a bytearray whose head was
    dropped a fresh buffer on each growth, whose pages are mapped and faulted in again each time."""

    def __init__(self, capacity: int) -> None:
        self.data = bytearray(capacity)
        self.length = 0

    def append(self, chunk: bytes) -> None:
        end = self.length + len(chunk)
        if end > len(self.data):
            self.data.extend(bytes(max(end, 2 * len(self.data)) - len(self.data)))
        # Through a memoryview: a bytearray's slice assignment copies a `bytes` value first.
        with memoryview(self.data) as view:
            view[self.length : end] = chunk
        self.length = end

    def drop(self, count: int) -> None:
        """Drop the first `count` bytes (the rest is short: part of one element)."""
        rest = self.length - count
        self.data[:rest] = self.data[count : self.length]
        self.length = rest


def _head(source: TextSource, text: _Text, path: Path) -> tuple[dict[str, Any], int]:
    """The members before `traceEvents` (`{`, members, `,` decoded with `}` for the comma, which
    only a top-level key allows; else the next key is tried) and where its `[` is."""
    start = 0
    while True:
        key_at = text.data.find(_KEY, start, text.length)
        if key_at < 0 or (text.length < key_at + 64 and not source.eof):
            if source.eof:
                _no_events(bytes(text.data[: text.length]), path)
            if text.length > _MAX_BUFFER:
                raise _refuse(path, f"no 'traceEvents' array in the first {_MAX_BUFFER >> 20} MiB")
            text.append(source.read())
            continue
        # Up to the key's opening quote, which stands for the first character when none is before.
        head = bytes(text.data[: key_at + 1]).strip(_JSON_WS)
        if head[:1] != b"{":
            raise _not_an_object(head, path)
        head = head[:-1].rstrip(_JSON_WS)
        metadata: dict[str, Any] | None = {} if head == b"{" else None
        if head.endswith(b",") and head[:-1].rstrip(_JSON_WS) != b"{":
            with contextlib.suppress(ValueError, RecursionError):  # else not a top-level key
                metadata = json.loads((head[:-1] + b"}").decode())
        if metadata is not None:
            after = _AFTER_KEY.match(text.data, key_at + len(_KEY), text.length)
            at, colon = after.end(), after.group(1)  # type: ignore[union-attr]  # `*` matches
            found = _first_char(text.data[at : min(at + 4, text.length)])
            if colon and found == "[":
                return metadata, at
            if not found:
                raise _truncated(path)
            raise _refuse(path, f"expected '[' to open traceEvents, found {found!r}")
        start = key_at + 1


def _not_an_object(start: bytes | bytearray, path: Path) -> CorruptTraceError:
    return _refuse(path, f"expected a JSON object, found {_first_char(start)!r}")


def _first_char(data: bytes | bytearray) -> str:
    """The character `data` starts with ("" when its first bytes are not UTF-8)."""
    return bytes(data[:4]).decode("utf-8", "ignore")[:1]


def _refuse(path: Path, what: str) -> CorruptTraceError:
    return CorruptTraceError(f"{path}: not a Kineto trace: {what}")


def _no_events(data: bytes, path: Path) -> NoReturn:
    """Refuse a whole file read without a usable `traceEvents` key."""
    data = data.strip(_JSON_WS)
    if not data:
        raise CorruptTraceError(f"{path}: the file is empty")
    if data[:1] != b"{":
        raise _not_an_object(data, path)
    _loads(data, path, "the top level")
    raise _refuse(path, "no 'traceEvents' array")


def _members_after(rest: bytes, metadata: dict[str, Any], path: Path) -> None:
    """Add to `metadata` the members in `rest`, the text after the `]` that closes traceEvents."""
    rest = rest.strip(_JSON_WS)
    if rest[:1] == b",":
        members = _loads(b"{" + rest[1:], path, "a top-level value", "after traceEvents: ")
        if "traceEvents" in members:
            raise _refuse(path, "a second 'traceEvents' key")
        metadata.update(members)
    elif rest[:1] == b"}":
        if rest[1:]:
            raise _refuse(path, _EXTRA_DATA)
    elif not rest:
        raise _truncated(path)
    else:
        raise _refuse(path, f"expected ',' or '}}' after traceEvents, found {_first_char(rest)!r}")


def _truncated(path: Path) -> TruncatedTraceError:
    return TruncatedTraceError(f"{path}: the JSON document ends early (truncated file)")


def _too_deep(path: Path, what: str) -> TraceNestingError:
    return TraceNestingError(
        f"{path}: not a Kineto trace: {what} nests deeper than the JSON decoder goes (about "
        f"{sys.getrecursionlimit()} levels; an event nests 3)"
    )


def _loads(data: bytes, path: Path, value: str, what: str = "") -> Any:
    """`json.loads` of a whole top-level `value`, a failure refused in one line. The text is
    decoded first (TextSource checked it as UTF-8): given bytes, json guesses UTF-16 from a NUL."""
    try:
        return json.loads(data.decode())
    except RecursionError:
        raise _too_deep(path, value) from None
    except json.JSONDecodeError as exc:
        if exc.msg.startswith("Extra data"):
            raise _refuse(path, _EXTRA_DATA) from None
        if exc.pos >= len(data) - 1 or "Unterminated" in exc.msg:
            raise _truncated(path) from None
        raise _refuse(path, f"{what}{exc.msg} at character {exc.pos}") from None


# A literal cut by the end of the text (`tr|ue`, `-Infin|ity`) fails this close to the end.
_LITERAL_SLACK = 10


class _Events:
    """Turns the events into column blocks; counts them (HTA's `index`)."""

    def __init__(self, cols: ColumnBuilder, path: Path) -> None:
        self.cols = cols
        self.path = path
        self.position = 0

    def decode(self, text: _Text) -> int:
        """The C pass over the whole events at the head of the text; returns the bytes it took."""
        cols = self.cols
        with memoryview(text.data) as view, view[: text.length] as live:
            count, taken, ts_has_float, ts_all_present, columns = _decode_columns(
                live, self.position, cols.symbols
            )
        cols.ts_has_float |= ts_has_float
        cols.ts_all_present &= ts_all_present
        if columns:
            cols.add_blocks(columns)
        self.position += count
        return taken

    def walk(self, text: _Text, *, eof: bool) -> int:
        """Decode the elements at the head of the text one at a time with Python's json; return
        the bytes to drop (the text then starts at the separator after the last element taken)."""
        path = self.path
        s, _ = codecs.utf_8_decode(bytes(text.data[: text.length]), "strict", eof)
        n = len(s)
        add = event_sink(self.cols)
        scan = json.JSONDecoder().raw_decode
        taken = 0  # characters up to the separator after the last element taken
        while True:
            i = _SKIP_WS(s, taken + 1).end()  # type: ignore[union-attr]  # `*` always matches
            if i >= n:
                if eof:
                    raise _truncated(path)
                taken = n - 1  # a run of whitespace is dropped (a gzip bomb of spaces)
                break
            if s[i] == "]":
                taken = i
                break
            what = f"traceEvents[{self.position}]"
            try:
                ev, end = scan(s, i)
            except RecursionError:
                raise _too_deep(path, what) from None
            except json.JSONDecodeError as exc:
                if exc.pos >= n - _LITERAL_SLACK or "Unterminated" in exc.msg:
                    if eof:
                        raise _truncated(path) from None
                    break  # the element goes on in the text not read yet
                raise _refuse(
                    path, f"{what}: {exc.msg} at character {exc.pos - i} of the value"
                ) from None
            j = _SKIP_WS(s, end).end()  # type: ignore[union-attr]
            if j >= n:
                if eof:
                    raise _truncated(path)
                break  # a number may go on, and the separator is not read yet
            if s[j] not in ",]":
                raise _refuse(path, f"expected ',' or ']' after {what}, found {s[j]!r}")
            add(ev, self.position)
            self.position += 1
            taken = j
            if s[j] == "]":
                break
        self.cols.flush()
        return len(s[:taken].encode())
