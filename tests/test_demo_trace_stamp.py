"""The demo's real CUDA trace is uploaded as if captured now (issue 31): recorded on 2021-06-08,
its findings otherwise carried that date and fell outside the demo's default window. Stamping
moves every event by one whole number of microseconds and changes nothing else."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime, timedelta
from pathlib import Path

from analyzers.traces.api import load_trace_set
from analyzers.traces.findings import _window
from app.demo_trace import EVENT_TS, TRACE, stamped

AT = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)


def test_every_event_moves_by_one_shift_and_nothing_else_changes() -> None:
    original = gzip.decompress(TRACE.read_bytes())
    moved = gzip.decompress(stamped(TRACE.read_bytes(), AT))
    assert EVENT_TS.sub(b'"ts": 0', moved) == EVENT_TS.sub(b'"ts": 0', original)
    before = [int(ts) for ts in EVENT_TS.findall(original)]
    after = [int(ts) for ts in EVENT_TS.findall(moved)]
    assert len(after) == len(before) > 1000
    assert {a - b for a, b in zip(after, before, strict=True)} == {after[0] - before[0]}
    assert max(after) == int(AT.timestamp() * 1_000_000)


def test_the_stamped_trace_is_read_as_captured_just_before_the_upload(tmp_path: Path) -> None:
    path = tmp_path / "resnet50.pt.trace.json.gz"
    path.write_bytes(stamped(TRACE.read_bytes(), AT))
    trace = load_trace_set(path)
    start, end = _window(trace, next(iter(trace.frames())))
    assert AT - timedelta(seconds=5) < start < end <= AT  # the file spans about 1.2 s
