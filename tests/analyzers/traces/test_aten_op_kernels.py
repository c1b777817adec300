"""ATen op kernels and delays agree with HTA 0.5.0's `get_aten_op_kernels_and_delay()`.

References: tests/data/traces/*/hta-0.5.0/aten_op_kernels.json (bench/hta_api_goldens.py, HTA's
own environment, the trace's first rank). Every (op, kernel sequence) row is equal: count and
both mean delays as HTA rounded them. HTA raises on the HIP trace (no launch matches); we say so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analyzers.traces.analyses.aten_op_kernels import op_kernel_rows
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
