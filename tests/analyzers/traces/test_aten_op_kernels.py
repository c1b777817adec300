"""ATen op kernels and delays agree with HTA 0.5.0's `get_aten_op_kernels_and_delay()`.

References: tests/data/traces/*/hta-0.5.0/aten_op_kernels.json (bench/hta_api_goldens.py, HTA's
own environment, the trace's first rank). Every (op, kernel sequence) row is equal: count and
both mean delays as HTA rounded them. HTA raises on the HIP trace (no launch matches); we say so.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzers.traces.analyses.aten_op_kernels import enclosing_ops, op_kernel_rows
from analyzers.traces.api import run_analyses
from tests.analyzers.traces.trace_paths import DATA, MAIN_TRACES, trace_set


@pytest.mark.parametrize("trace_dir", MAIN_TRACES, ids=lambda p: p.name)
def test_agrees_with_hta(trace_dir: Path) -> None:
    golden = json.loads((trace_dir / "hta-0.5.0" / "aten_op_kernels.json").read_text())
    frame = trace_set(trace_dir, hta_compatible=True).ranks[golden["rank"]]
    ours = {(a, b): (c, x, y) for a, b, c, x, y in op_kernel_rows(frame)}
    if "error" in golden:
        assert golden["error"] == "KeyError: 'thread_id'" and ours == {}
        return
    expected = {
        (r["aten_op_name"], r["kernel_sequence"]): (
            r["occurrence_count"],
            r["avg_aten_op_launch_delay"],
            r["avg_runtime_delay"],
        )
        for r in golden["rows"]
    }
    assert ours == expected


def test_hip_trace_says_no_launch_is_inside_an_aten_op() -> None:
    result = run_analyses(trace_set(DATA / "hta_amd_mi250_minitoy"), names=["aten_op_kernels"])
    assert result["aten_op_kernels"].notes == ("rank 0: no kernel launched inside an ATen op",)


def test_rows_are_most_frequent_first() -> None:
    result = run_analyses(trace_set(DATA / "kineto_resnet50_nw0"), names=["aten_op_kernels"])
    rows = result["aten_op_kernels"].table("aten_op_kernels_and_delay").records()
    counts = [r["occurrence_count"] for r in rows]
    assert counts == sorted(counts, reverse=True)
    assert rows[0]["aten_op_name"] == "aten::add_" and rows[0]["occurrence_count"] == 2994


def _enclosing_one(op_ts: np.ndarray, op_end: np.ndarray, ts: float, end: float) -> int:
    """The definition, one interval at a time: the latest-starting op (in start order) that
    starts at or before `ts` and ends at or after `end`, -1 if none."""
    hit = np.flatnonzero((op_ts <= ts) & (op_end >= end))
    return int(hit[-1]) if len(hit) else -1


_TIMES = st.integers(0, 300).map(float)


@settings(max_examples=150, deadline=None)
@given(
    ops=st.lists(st.tuples(_TIMES, _TIMES), max_size=200),
    launches=st.lists(st.tuples(_TIMES, _TIMES), max_size=40),
)
def test_enclosing_ops_finds_the_latest_starting_op_around_each_launch(
    ops: list[tuple[float, float]], launches: list[tuple[float, float]]
) -> None:
    op_ts = np.sort(np.array([a for a, _ in ops], dtype=np.float64))
    op_end = op_ts + np.array([b for _, b in ops], dtype=np.float64)
    ts = np.array([a for a, _ in launches], dtype=np.float64)
    end = ts + np.array([b for _, b in launches], dtype=np.float64) / 10
    expected = [_enclosing_one(op_ts, op_end, t, e) for t, e in zip(ts, end, strict=True)]
    assert enclosing_ops(op_ts, op_end, ts, end).tolist() == expected
