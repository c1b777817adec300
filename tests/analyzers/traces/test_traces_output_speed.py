"""What made `fleetscope trace analyze` faster as a whole command (issue 19) changes no byte of
what it prints: the JSON made by msgspec equals the stdlib's (which still writes whatever msgspec
would write otherwise), the console script's exit without teardown still flushes everything
(checked in a subprocess, the only place it runs), and the shortcuts taken in the analyses give
the floats of what they replaced."""

from __future__ import annotations

import json
import math
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzers.traces.api import analyze_trace
from analyzers.traces.render import _msgspec_json, json_ready, report_json, report_to_dict
from analyzers.traces.stats import intersection_length, union_intervals, window_intersections
from tests.analyzers.traces.trace_paths import ALL_TRACES, DATA


def _stdlib(data: Any) -> str:
    return json.dumps(json_ready(data), indent=1)


@pytest.mark.parametrize("trace_dir", ALL_TRACES, ids=lambda p: p.name)
@pytest.mark.parametrize("hta", [True, False], ids=["hta", "native"])
def test_the_json_is_the_stdlibs_byte_for_byte(trace_dir: Path, hta: bool) -> None:
    report = analyze_trace(trace_dir, hta_compatible=hta)
    assert report_json([report]) == _stdlib(report_to_dict(report)) + "\n"


def test_the_golden_traces_take_the_msgspec_path() -> None:
    """Two carry a float msgspec writes otherwise (1.1102230246251565e-16, 0.0000...): it is
    rewritten as Python writes it, the document stays msgspec's."""
    fast = [
        _msgspec_json(report_to_dict(analyze_trace(d, hta_compatible=True)))
        for d in ALL_TRACES
        if d.parent.name != "edge_cases"
    ]
    assert all(text is not None for text in fast)


@pytest.mark.parametrize(
    ("value", "fallback"),
    [
        (math.inf, True),
        (-math.inf, True),
        (np.float64(math.inf), True),
        ("caf\u00e9", True),
        ("tab\there\u0001", True),
        ("del\x7f", True),
        ('quote" back\\slash / \n\r\b\f', False),
        (2**70, True),
    ],
)
def test_what_msgspec_writes_otherwise_goes_to_the_stdlib(value: object, fallback: bool) -> None:
    data = {"a": [1.5, None, {"b": value}], 3: np.int64(7), "c": np.float32(0.25)}
    text = _msgspec_json(data)
    if fallback:
        assert text is None
    assert text is None or text == _stdlib(data)


def test_numbers_are_written_as_the_stdlib_writes_them() -> None:
    """Floats from 1e-4 to 1e16 go through msgspec; one with an exponent sends all to the stdlib."""
    rng = np.random.default_rng(19)
    plain = [0.0, -0.0, 1.0, 1e-4, 0.000123, 123456789.125, 9999999999999998.0]
    signs = rng.choice([-1.0, 1.0], 5000)
    plain += (signs * rng.uniform(1, 10, 5000) * 10.0 ** rng.integers(-4, 15, 5000)).tolist()
    data: dict[str, Any] = {
        "f": plain,
        "i": [0, -1, 2**63 - 1, -(2**63)],
        "n": [math.nan, np.float64(math.nan), True, False, None, np.bool_(True)],
        "e": [[], {}, [[]], ""],
    }
    assert _msgspec_json(data) == _stdlib(data)
    for odd in (1e16, 1e-5, 8.53e-05, 1e-7, 5e-324, 1.7976931348623157e308, 1.1102230246251565e-16):
        assert _msgspec_json({**data, "odd": [odd, -odd]}) == _stdlib({**data, "odd": [odd, -odd]})
    values = (rng.standard_normal(20000) * 10.0 ** rng.integers(-30, 30, 20000)).tolist()
    assert _msgspec_json(values) == _stdlib(values)
    for value in values[:2000]:
        assert _msgspec_json([value]) == _stdlib([value])


def test_odd_floats_are_rewritten_outside_strings_only() -> None:
    """Text that looks like an odd float inside a string (a key or a value) stays as it is."""
    data = {
        ":1e5": ",1e5",
        '[0.00001"': ['x":1e5', 1e-5, {"k,2.5e-7": 2.5e-7}],
        'esc\\aped"': '\\":1e9',
        "plain": [1, -2, 0.5, 1e16, -0.0],
    }
    assert _msgspec_json(data) == _stdlib(data)


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


def test_the_rank_key_is_found_where_bytes_find_it() -> None:
    """The memchr search (C extension) for HTA's `"rank":` (trace_text) answers as `in` does,
    borders included."""
    from analyzers.traces import trace_text
    from analyzers.traces.trace_text import _RANK_KEY, holds_rank_key

    if trace_text._find is None:
        pytest.skip("the C extension analyzers/traces/_kineto_columns.c is not built here")

    rng = np.random.default_rng(7)
    alphabet = np.frombuffer(b'"rank: k{}ab', dtype=np.uint8)
    texts = [b"", b'"rank":', b'x"rank":', b'"rank":x', b'"rank"', b'rank":', b'"rank";']
    texts += [rng.choice(alphabet, int(rng.integers(0, 16))).tobytes() for _ in range(20000)]
    for text in texts:
        assert holds_rank_key(text) == (_RANK_KEY in text), text


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
