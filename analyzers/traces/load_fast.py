"""The trace decoder: batches of `traceEvents` go straight to column blocks by the C pass of
analyzers/traces/_kineto_columns.c; what it leaves is decoded by msgspec into plain values and
reduced by `columns.event_sink`, the reference rules (tests hold the two to the same columns).

Why C: decoding each event into a dict and reducing it in Python was about 90 % of the load
(RawTrace's columns need 13 numbers of an event and its `args`); the C pass skips the other fields
as it validates them: on the 1 GB 8-rank set it was 2.7x faster than msgspec's typed structs turned
into columns, and 5.6x faster than orjson or msgspec decoding the same text into dicts alone
(bench/trace_decoders.py, bench/RESULTS.md), so it stays by issue 29's rule (at least 2x the best
well-kept decoder, and fuzzed: bench/fuzz_traces.py). HTA's `json.load` of the whole document is what
makes its memory 4x ours, so batches stay bounded: the decompressed text is read in chunks and cut
after the last `},` of the buffer. A cut is checked, not trusted: `[` + text + `]` decodes only
if the cut fell between two elements of `traceEvents` (inside a string or a nested object the
brackets or quotes would not balance), and a rejected cut is retried at an earlier `},`.

What it must never do: accept a file the reference parser refuses, or read a value differently.
The C pass takes only strict JSON of the event shapes it knows; a batch with anything else (a
string stream id, a null `args`, an integer beyond int64) takes the reference rules. Anything that
cannot be decoded at all (a truncated or corrupt file, NaN literals, lone surrogates, a top level
it does not recognise) makes `decode_fast` return None, and `load.py` reads the file again with the
stdlib parser (load_stdlib.py), which says what is wrong. Never imports pandas.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from analyzers.traces.columns import ColumnBuilder, SymbolTable, event_sink
from analyzers.traces.trace_text import GZIP_ERRORS, TextSource

__all__ = ["COLUMNS_PATH", "decode_fast"]

# The C pass from text to columns (analyzers/traces/_kineto_columns.c); an optional extension:
# without a compiler every batch takes the reference rules (same columns, ~5x the CPU). None
# forces that path (tests).
_decode_columns: Callable[[Any, int, SymbolTable], Any] | None
COLUMNS_PATH: str
try:
    from analyzers.traces import _kineto_columns

    _decode_columns = _kineto_columns.decode_events
    COLUMNS_PATH = "c"
except ImportError:  # pragma: no cover - exercised where the extension is not built
    _decode_columns = None
    COLUMNS_PATH = "msgspec"

_KEY = b'"traceEvents"'
_KEY_RE = re.compile(rb"[ \t\n\r]*:[ \t\n\r]*\[")
_JSON_WS = b" \t\n\r"
# Give up on the fast path when this much text is buffered without a decodable batch (a corrupt
# file, or a top level that is not the usual one); the stdlib path then reads it with bounded memory.
_MAX_BUFFER = 64 << 20
_CUT = b"},"
_OPEN, _CLOSE, _COMMA = b"[],"
_CUT_TRIES = 4


_ANY = msgspec.json.Decoder()
_TAIL = msgspec.json.Decoder(dict[str, msgspec.Raw])
_META = msgspec.json.Decoder(dict[str, Any])
_DECODE_ERRORS = (msgspec.MsgspecError, ValueError)


class _Fallback(Exception):
    """The fast path cannot read this file; the stdlib path will (or will say why not)."""


_READ_ERRORS: tuple[type[BaseException], ...] = (
    _Fallback,
    OSError,
    EOFError,
    zlib.error,
    *GZIP_ERRORS,
    *_DECODE_ERRORS,
)


def decode_fast(
    path: Path, cols: ColumnBuilder, chunk_size: int
) -> tuple[dict[str, Any], int | None] | None:
    """Fill `cols` from the file; return (top-level metadata, HTA's rank), or None when the
    stdlib path must read the file instead (then `cols` is garbage)."""
    try:
        source = TextSource(path, chunk_size)
    except OSError:
        return None
    try:
        return _decode(source, cols, path), source.hta_rank
    except _READ_ERRORS:
        return None
    except (TypeError, ValueError, OverflowError):  # a malformed event: the stdlib path names it
        return None
    except RecursionError:  # nesting past msgspec's depth: the stdlib path names the value
        return None
    finally:
        source.close()


class _Text:
    """The text not decoded yet, at the start of one bytearray that is allocated once (and grows
    only for an element longer than it). Why not `del buf[:cut]` then `buf += chunk`: CPython
    gives a bytearray whose head was dropped a fresh buffer on every growth, ~1 MiB a chunk, and
    the allocator maps and faults in its pages each time (~3,000 page faults, 5-10 ms of a
    large trace's load in a fresh process, issue 19)."""

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

    def find(self, sub: bytes, start: int = 0) -> int:
        return self.data.find(sub, start, self.length)


def _decode(source: TextSource, cols: ColumnBuilder, path: Path) -> dict[str, Any]:
    # The members before `traceEvents`: `{`, members, `,` decode as an object once the comma is
    # replaced by `}`, and only if the key really is a top-level key.
    text = _Text(2 * source.chunk_size + 64)
    buf = text.data
    while (key_at := text.find(_KEY)) < 0 or (text.length < key_at + 64 and not source.eof):
        if source.eof or text.length > _MAX_BUFFER:
            raise _Fallback
        text.append(source.read())
        buf = text.data
    head = bytes(buf[:key_at]).rstrip(_JSON_WS)
    if head.lstrip(_JSON_WS) == b"{":
        metadata = {}
    elif head.endswith(b",") and head[:-1].strip(_JSON_WS) != b"{":
        metadata = _META.decode(head[:-1] + b"}")
    else:
        raise _Fallback
    opening = _KEY_RE.match(buf, key_at + len(_KEY), text.length)
    if opening is None:  # not `"traceEvents": [`: the stdlib path says what it is
        raise _Fallback
    # From here on the text's first byte is the `[` or `,` before the next element.
    text.drop(opening.end() - 1)
    batches = _Batches(cols, path)
    # Where the search for a `},` starts: past the text already searched in vain, so a run of
    # text without one (a gzip bomb of spaces) is searched once, not once a chunk.
    searched = 0
    while True:
        if not source.eof and text.length < source.chunk_size:
            text.append(source.read())
            continue
        cut = 0
        if text.find(_CUT, max(1, searched - 1)) >= 0:
            cut = _decode_batch(text.data, text.length, batches)
        else:
            searched = text.length
        if cut:
            text.drop(cut)
            searched = 0
        elif source.eof:
            break
        elif text.length > _MAX_BUFFER:
            raise _Fallback
        else:
            text.append(source.read())
    # What is left: the last elements, `]`, and the members after `traceEvents`, decoded as
    # `{"traceEvents": [` + rest, so that the last element and the array's end need no cut.
    if text.find(_KEY) >= 0:
        raise _Fallback  # a second `traceEvents` key: the stdlib path reads both, as before
    buf = text.data
    buf[0] = _OPEN
    tail = _TAIL.decode(b'{"traceEvents":' + buf[: text.length])
    batches.decode(tail.pop("traceEvents"))
    for key, raw in tail.items():
        metadata[key] = _ANY.decode(raw)
    cols.count = batches.position
    return metadata


def _decode_batch(buf: bytearray, end: int, batches: _Batches) -> int:
    """Decode the whole elements in `buf[:end]` (after its first byte, a `[` or `,`); return
    the position of the `,` after the last one decoded (0: no cut found that decodes).

    The batch is decoded in place, without a copy: its first byte becomes `[` and the `,` after
    it becomes `]` for the duration of the call.
    """
    for _ in range(_CUT_TRIES):
        cut = buf.rfind(_CUT, 1, end)
        if cut < 0:
            return 0
        buf[0] = _OPEN
        buf[cut + 1] = _CLOSE
        try:
            with memoryview(buf) as view, view[: cut + 2] as batch:
                batches.decode(batch)
        except _DECODE_ERRORS:
            end = cut
            continue
        finally:
            buf[cut + 1] = _COMMA
        return cut + 1
    return 0


class _Batches:
    """Turns decoded batches of events into column blocks; counts events (HTA's `index`)."""

    def __init__(self, cols: ColumnBuilder, path: Path) -> None:
        self.cols = cols
        self.path = path
        self.position = 0

    def decode(self, text: memoryview | msgspec.Raw) -> None:
        """Decode one JSON array of events; raise a msgspec error if it is not valid JSON (so the
        caller can try another cut). The C pass takes every batch of the shapes it knows; the
        rest (a string stream id, a null `args`, an integer beyond int64: a batch or two of an
        odd file) is decoded into plain values and reduced by the reference rules."""
        if _decode_columns is None or not self._columns(text):
            self._reference(_ANY.decode(text))

    def _columns(self, text: memoryview | msgspec.Raw) -> bool:
        """The batch through the C pass; False when it leaves the batch to msgspec."""
        assert _decode_columns is not None
        cols = self.cols
        decoded = _decode_columns(text, self.position, cols.symbols)
        if decoded is None:
            return False
        count, ts_has_float, ts_all_present, columns = decoded
        if ts_has_float:
            cols.ts_has_float = True
        if not ts_all_present:
            cols.ts_all_present = False
        if columns:
            cols.add_blocks(columns)
        self.position += count
        return True

    def _reference(self, events: object) -> None:
        if not isinstance(events, list):
            raise _Fallback
        add = event_sink(self.cols, self.path)
        position = self.position
        for ev in events:
            add(ev, position)
            position += 1
        self.cols.flush()
        self.position = position
