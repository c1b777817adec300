"""The trace decoder: the events of `traceEvents` go straight to column blocks by the C pass of
analyzers/traces/_kineto_columns.c, which decodes whole events from the head of the text and stops
at the first element it does not take. That element (an odd shape such as a string stream id or
a null `args`, malformed JSON, an element the text cut) and the rest of the text it is in are
decoded by Python's json and reduced by `columns.event_sink`, the reference rules (`_Events.walk`,
which names the element and what is wrong in one line); then the C pass goes on with the next
chunk. Tests hold the whole decoder to the stdlib oracle in tests/analyzers/traces/stdlib_oracle.py.

Why C: decoding each event into a dict and reducing it in Python was about 90 % of the load. Why
chunks: HTA's `json.load` of the whole document is what makes its memory 4x ours. Every refusal
is a TraceError naming the file. Never imports pandas.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import re
import sys
from pathlib import Path
from typing import Any

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

__all__ = ["decode", "flush_columns"]

_decode_columns = _kineto_columns.decode_events

_KEY = b'"traceEvents"'
_KEY_RE = re.compile(rb"[ \t\n\r]*:[ \t\n\r]*\[")
_AFTER_KEY = re.compile(rb"[ \t\n\r]*:?[ \t\n\r]*")
_FIRST = re.compile(rb"[ \t\n\r]*([^ \t\n\r])")
_SKIP_WS = re.compile(r"[ \t\n\r]*").match
_JSON_WS = b" \t\n\r"
# The most text buffered while looking for the key, or for the end of one element: a file past
# it is refused (no Kineto event or metadata block comes near it).
_MAX_BUFFER = 64 << 20
_CLOSE = ord("]")


def decode(path: Path, cols: ColumnBuilder, chunk_size: int) -> tuple[dict[str, Any], int | None]:
    """Fill `cols` from the file; return (top-level metadata, HTA's rank). Raises a TraceError
    (CorruptTraceError, TruncatedTraceError, TraceNestingError, NonFiniteTraceError,
    TraceBudgetError) that names the file and what is wrong."""
    source = TextSource(path, chunk_size)
    try:
        return _decode(source, cols, path), source.hta_rank
    finally:
        source.close()


class _Text:
    """The text not decoded yet, at the start of one bytearray that is allocated once (and grows
    only for an element longer than it). Why not `del buf[:cut]` then `buf += chunk`: CPython
    gives a bytearray whose head was dropped a fresh buffer on every growth, whose pages the
    allocator maps and faults in again each time."""

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


def _decode(source: TextSource, cols: ColumnBuilder, path: Path) -> dict[str, Any]:
    text = _Text(2 * source.chunk_size + 64)
    metadata, opening = _head(source, text, path)
    # From here on the text's first byte stands for the `[` or `,` before the next element; it is
    # `]` once the array is closed.
    text.drop(opening)
    events = _Events(cols, path)
    while text.data[0] != _CLOSE:
        if not source.eof:
            text.append(source.read())
        text.drop(events.decode(text))
        # Where the C pass stopped short of a chunk from the end, the next chunk comes first.
        if text.data[0] != _CLOSE and (source.eof or text.length >= source.chunk_size):
            text.drop(events.walk(text, eof=source.eof))
        if text.length > _MAX_BUFFER:
            raise CorruptTraceError(
                f"{path}: not a Kineto trace: traceEvents[{events.position}] is longer than "
                f"{_MAX_BUFFER >> 20} MiB"
            )
    while not source.eof and text.length <= _MAX_BUFFER:
        text.append(source.read())
    return _members_after(text, metadata, events, path)


def _head(source: TextSource, text: _Text, path: Path) -> tuple[dict[str, Any], int]:
    """The members before `traceEvents` and the position of the `[` that opens it: `{`,
    members, `,` decode as an object once the comma is replaced by `}`, and only if the key
    found really is a top-level key (else the next one is tried)."""
    start = 0
    while True:
        key_at = text.data.find(_KEY, start, text.length)
        if key_at < 0 or (text.length < key_at + 64 and not source.eof):
            if source.eof:
                raise _no_events(bytes(text.data[: text.length]), path)
            if text.length > _MAX_BUFFER:
                raise CorruptTraceError(
                    f"{path}: not a Kineto trace: no 'traceEvents' array in the first "
                    f"{_MAX_BUFFER >> 20} MiB"
                )
            text.append(source.read())
            continue
        buf = text.data
        first = _FIRST.match(buf, 0, text.length)
        if first is not None and first.group(1) != b"{":
            raise _not_an_object(bytes(buf[first.start(1) : first.start(1) + 4]), path)
        head = bytes(buf[:key_at]).rstrip(_JSON_WS)
        metadata: dict[str, Any] | None = None
        if head.lstrip(_JSON_WS) == b"{":
            metadata = {}
        elif head.endswith(b",") and head[:-1].strip(_JSON_WS) != b"{":
            with contextlib.suppress(ValueError, RecursionError):  # else not a top-level key
                value = json.loads(head[:-1] + b"}")
                metadata = value if isinstance(value, dict) else None
        if metadata is not None:
            opening = _KEY_RE.match(buf, key_at + len(_KEY), text.length)
            if opening is None:
                raise _not_an_array(buf[key_at + len(_KEY) : text.length], path)
            return metadata, opening.end() - 1
        start = key_at + 1


def _not_an_array(after_key: bytes | bytearray, path: Path) -> Exception:
    after = _AFTER_KEY.match(after_key).end()  # type: ignore[union-attr]  # `*` always matches
    found = bytes(after_key[after : after + 4]).decode("utf-8", "ignore")[:1]
    if not found:
        return _truncated(path)
    return CorruptTraceError(
        f"{path}: not a Kineto trace: expected '[' to open traceEvents, found {found!r}"
    )


def _not_an_object(start: bytes, path: Path) -> CorruptTraceError:
    char = start.decode("utf-8", "ignore")[:1]
    return CorruptTraceError(f"{path}: not a Kineto trace: expected a JSON object, found {char!r}")


def _no_events(data: bytes, path: Path) -> Exception:
    """The error for a whole file read without a usable `traceEvents` key."""
    data = data.strip(_JSON_WS)
    if not data:
        return CorruptTraceError(f"{path}: the file is empty")
    if data[:1] != b"{":
        return _not_an_object(data[:4], path)
    try:
        json.loads(data)
    except RecursionError:
        return TraceNestingError(f"{path}: not a Kineto trace: {_too_deep('the top level')}")
    except json.JSONDecodeError as exc:
        return _json_error(exc, len(data), path, "")
    return CorruptTraceError(f"{path}: not a Kineto trace: no 'traceEvents' array")


def _members_after(
    text: _Text, metadata: dict[str, Any], events: _Events, path: Path
) -> dict[str, Any]:
    """The members after the `]` that closes `traceEvents` (the text's first byte)."""
    rest = bytes(text.data[1 : text.length]).strip(_JSON_WS)
    if rest[:1] == b",":
        try:
            members = json.loads(b"{" + rest[1:])
        except RecursionError:
            raise TraceNestingError(
                f"{path}: not a Kineto trace: {_too_deep('a top-level value')}"
            ) from None
        except json.JSONDecodeError as exc:
            raise _json_error(exc, len(rest), path, "after traceEvents: ") from None
        if "traceEvents" in members:
            raise CorruptTraceError(f"{path}: not a Kineto trace: a second 'traceEvents' key")
        metadata.update(members)
    elif rest[:1] == b"}":
        if rest[1:]:
            raise CorruptTraceError(
                f"{path}: not a Kineto trace: extra data after the top-level object"
            )
    elif not rest:
        raise _truncated(path)
    else:
        char = rest[:4].decode("utf-8", "ignore")[:1]
        raise CorruptTraceError(
            f"{path}: not a Kineto trace: expected ',' or '}}' after traceEvents, found {char!r}"
        )
    events.cols.count = events.position
    return metadata


def _truncated(path: Path) -> TruncatedTraceError:
    return TruncatedTraceError(f"{path}: the JSON document ends early (truncated file)")


def _too_deep(what: str) -> str:
    return (
        f"{what} nests deeper than the JSON decoder goes (about {sys.getrecursionlimit()} "
        "levels; an event nests 3)"
    )


def _json_error(exc: json.JSONDecodeError, length: int, path: Path, what: str) -> Exception:
    """Python json's error on a whole value of `length` characters, as one line."""
    if exc.msg.startswith("Extra data"):
        return CorruptTraceError(
            f"{path}: not a Kineto trace: extra data after the top-level object"
        )
    if exc.pos >= length - 1 or "Unterminated" in exc.msg:
        return _truncated(path)
    return CorruptTraceError(f"{path}: not a Kineto trace: {what}{exc.msg} at character {exc.pos}")


def flush_columns(cols: ColumnBuilder, path: Path) -> None:
    """`cols.flush()`, with a value its column cannot hold refused as a corrupt trace."""
    try:
        cols.flush()
    except (TypeError, ValueError, OverflowError) as exc:  # e.g. a timestamp of 10**320
        raise CorruptTraceError(
            f"{path}: not a Kineto trace: a value does not fit its column "
            f"({type(exc).__name__}: {exc})"
        ) from exc


# A literal cut by the end of the text (`tr|ue`, `-Infin|ity`) fails this close to the end.
_LITERAL_SLACK = 10


class _Events:
    """Turns the events into column blocks; counts them (HTA's `index`)."""

    def __init__(self, cols: ColumnBuilder, path: Path) -> None:
        self.cols = cols
        self.path = path
        self.position = 0

    def decode(self, text: _Text) -> int:
        """The C pass over the whole events at the head of the text; returns the bytes it took
        (the text then starts at the separator after the last one)."""
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
        """Decode the elements at the head of the text one at a time with Python's json (the
        text's first byte stands for the separator before the next one); return the bytes to
        drop, so that the text starts at the separator after the last element taken. Raises the
        error that names the element when one is malformed, or truncated at the end of input."""
        path = self.path
        s, _ = codecs.utf_8_decode(bytes(text.data[: text.length]), "strict", eof)
        n = len(s)
        add = event_sink(self.cols, path)
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
                raise TraceNestingError(f"{path}: not a Kineto trace: {_too_deep(what)}") from None
            except json.JSONDecodeError as exc:
                if exc.pos >= n - _LITERAL_SLACK or "Unterminated" in exc.msg:
                    if eof:
                        raise _truncated(path) from None
                    break  # the element goes on in the text not read yet
                raise CorruptTraceError(
                    f"{path}: not a Kineto trace: {what}: {exc.msg} at character {exc.pos - i} "
                    "of the value"
                ) from None
            j = _SKIP_WS(s, end).end()  # type: ignore[union-attr]
            if j >= n:
                if eof:
                    raise _truncated(path)
                break  # a number may go on, and the separator is not read yet
            if s[j] not in ",]":
                raise CorruptTraceError(
                    f"{path}: not a Kineto trace: expected ',' or ']' after {what}, found {s[j]!r}"
                )
            add(ev, self.position)
            self.position += 1
            taken = j
            if s[j] == "]":
                break
        flush_columns(self.cols, path)
        return len(s[:taken].encode())
