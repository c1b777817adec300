"""What made `fleetscope trace analyze` faster as a whole command (issue 19) changes no byte of
what it prints: the console script's exit without teardown still flushes everything (checked in a
subprocess, the only place it runs), and the shortcuts taken in the analyses give the floats of
what they replaced."""

from __future__ import annotations

import math
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzers.traces.api import analyze_trace
from analyzers.traces.render import report_json
from analyzers.traces.stats import (
    intersection_length,
    time_lexsort,
    union_intervals,
    window_intersections,
)
from tests.analyzers.traces.trace_paths import DATA


def test_the_console_script_prints_everything_and_exits_zero(tmp_path: Path) -> None:
    """The console script ends without the interpreter's teardown: what it printed is flushed
    first (a pipe, as a user's `| jq`)."""
    trace = DATA / "hta_ns_resolution_rank0"
    code = "import sys; from app.cli import main; sys.exit(main())"
    args = ["trace", "analyze", "--hta-compatible", str(trace), "--format", "json"]
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, check=True)
    report = analyze_trace(trace, hta_compatible=True)
    assert out.stdout.decode() == report_json([report])
    closed = subprocess.run(
        f"{sys.executable} -c '{code}' {' '.join(args)} | head -c 10",
        shell=True,
        capture_output=True,
        check=True,
    )
    assert closed.stdout == out.stdout[:10] and b"Traceback" not in closed.stderr


def test_the_rank_is_the_first_match_in_the_file_wherever_chunks_end(tmp_path: Path) -> None:
    """HTA's rank (trace_text.TextSource: chunks searched only where they hold `"rank":`, and
    across each border) is the first match of HTA's regex over the whole text."""
    from analyzers.traces.trace_text import _HTA_RANK_RE, TextSource

    rng = np.random.default_rng(7)
    alphabet = np.frombuffer(b'"rank: \t12{}ab', dtype=np.uint8)
    texts = [b'"rank": 5', b'x"rank":\t\t42', b'"rank":5"rank": 6', b'"rank";7']
    texts += [b"x" * n + b'"rank":' + b" " * 70 + b"3" for n in (50, 60, 63)]  # long past a border
    texts += [rng.choice(alphabet, int(rng.integers(0, 40))).tobytes() for _ in range(3000)]
    path = tmp_path / "t.json"
    for text in texts:
        path.write_bytes(text + b"\n")  # a last match is never cut by the file's end
        match = _HTA_RANK_RE.search(text)
        for chunk in (1, 3, 8, 64):
            source = TextSource(path, chunk)
            while source.read():
                pass
            source.close()
            assert source.hta_rank == (int(match.group(1)) if match else None), (text, chunk)


_time = st.one_of(
    st.integers(0, 40).map(float),
    st.floats(0, 40, allow_nan=False),
    st.just(math.nan),
)


@settings(max_examples=500, deadline=None)
@given(
    intervals=st.lists(st.tuples(_time, _time), max_size=12),
    windows=st.lists(st.tuples(_time, _time), max_size=6),
    merge=st.booleans(),
)
def test_window_intersections_are_the_sweeps_floats(
    intervals: list[tuple[float, float]], windows: list[tuple[float, float]], merge: bool
) -> None:
    """The shortcut for one window against a merged set (low_util, steps, dataloader) gives the
    sweep's float bit for bit: ties at the window's edges, zero and negative lengths, NaN, and
    sets that are not merged (those keep the sweep)."""
    start = np.array([s for s, _ in intervals], dtype=np.float64)
    end = np.array([e for _, e in intervals], dtype=np.float64)
    if merge:
        start, end = union_intervals(start, end)
    fast = window_intersections(windows, start, end)
    sweep = [intersection_length(np.array([a]), np.array([b]), start, end) for a, b in windows]
    assert [struct.pack("<d", x) for x in fast] == [struct.pack("<d", x) for x in sweep]


_TIME = st.sampled_from([0.0, -0.0, 1.0, 1.5, 2.0, math.nan])


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.tuples(_TIME, _TIME, st.integers(0, 3)), max_size=60))
def test_time_lexsort_orders_rows_as_lexsort_does(rows: list[tuple[float, float, int]]) -> None:
    """Sorting by the time first and the rows sharing a time by the other keys gives numpy's
    lexsort order, ties (0.0 and -0.0 alike, NaNs together and last) and positions included."""
    time = np.array([r[0] for r in rows], dtype=np.float64)
    dur = np.array([r[1] for r in rows], dtype=np.float64)
    kind = np.array([r[2] for r in rows], dtype=np.int64)
    for keys in ((time,), (dur, time), (kind, -dur, time)):
        assert time_lexsort(keys).tolist() == np.lexsort(keys).tolist()
