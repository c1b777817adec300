"""Small real traces cut out of big ones: windows of a Kineto trace's `traceEvents`, written as
plain JSON files that keep every other top-level key (`distributedInfo`, `deviceProperties`, ...).

Why: the small-trace engine (analyzers/traces/engine.py) must give numpy's output on every small
trace, and only one of the real traces is small. A window of a real trace keeps its event kinds,
names, streams, launch links and quirks, cut at arbitrary points (a kernel whose launch fell
outside, a step without its end), which is what a short capture looks like. Used by the lite
engine's equality tests and by bench.trace_command's crossover run.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

__all__ = ["read_trace", "write_window"]


def read_trace(path: Path) -> dict[str, Any]:
    """A trace file's document (gzip or plain JSON)."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    document: dict[str, Any] = json.loads(data)
    return document


def write_window(document: dict[str, Any], start: int, events: int, out: Path) -> Path:
    """`out` holding `document` with `traceEvents[start:start + events]` only; metadata events
    (`ph` "M": process and thread names) are kept wherever they stand, as a capture has them."""
    trace_events = document["traceEvents"]
    window = trace_events[start : start + events]
    metadata = [e for e in trace_events if isinstance(e, dict) and e.get("ph") == "M"]
    kept = [e for e in metadata if e not in window] + window
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({**document, "traceEvents": kept}))
    return out
