"""Frequent kernel sequences (HTA 0.5.0 `get_frequent_cuda_kernel_sequences`).

HTA's goldens (tests/data/traces/*/hta-0.5.0/kernel_sequences.json, bench/hta_api_goldens.py)
answer only on the MI250 trace, with an empty table for every operator; on every other shared
trace HTA raises while building its call stacks. Where it answers, so do we, equally; elsewhere
the patterns are specified by what the real traces hold.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analyzers.traces.analyses.kernel_sequences import frequent_kernel_sequences
from analyzers.traces.api import run_analyses
from tests.analyzers.traces.trace_paths import DATA, MAIN_TRACES, trace_set


@pytest.mark.parametrize("trace_dir", MAIN_TRACES, ids=lambda p: p.name)
def test_agrees_with_hta_where_hta_answers(trace_dir: Path) -> None:
    golden = json.loads((trace_dir / "hta-0.5.0" / "kernel_sequences.json").read_text())
    frame = next(iter(trace_set(trace_dir, hta_compatible=True).frames()))
    for operator, expected in golden.items():
        if isinstance(expected, dict):  # HTA raised: nothing to agree with
            assert expected["error"].split(":")[0] in {"ValueError", "TypeError"}
            continue
        ours = frequent_kernel_sequences(frame, operator)
        assert [(p, c) for p, c, _, _ in ours] == [(r["pattern"], r["count"]) for r in expected]


def test_resnet_backward_convolutions_repeat_one_kernel_sequence() -> None:
    """The ResNet-50 step's most frequent sequence: cuDNN's backward convolution, 90 times in the
    profiled steps, each launching the same kernels; GPU and CPU totals are sums over them."""
    frame = trace_set(DATA / "kineto_resnet50_nw0").ranks[0]
    found = frequent_kernel_sequences(frame, "aten::cudnn_convolution_backward")
    pattern, count, gpu_us, cpu_us = found[0]
    names = pattern.split("|")
    assert names[0] == "aten::cudnn_convolution_backward" and len(names) >= 4
    assert count == 90 and gpu_us == 67983.0 and cpu_us == 19757.0
    assert [c for _, c, _, _ in found] == sorted((c for _, c, _, _ in found), reverse=True)


def test_nested_candidates_are_counted_once_and_short_ones_skipped() -> None:
    """`aten::conv2d` holds `aten::convolution`: asking for `aten::conv` counts conv2d only;
    min_pattern_len drops ops launching fewer kernels."""
    frame = trace_set(DATA / "hta_ns_resolution_rank0").ranks[0]
    outer = frequent_kernel_sequences(frame, "aten::conv")
    assert outer and {p.split("|")[0] for p, _, _, _ in outer} <= {
        "aten::conv2d",
        "aten::convolution_backward",
    }
    assert frequent_kernel_sequences(frame, "aten::conv", min_pattern_len=1000) == []
    assert frequent_kernel_sequences(frame, "no such op") == []


def test_report_lists_the_top_five_patterns() -> None:
    result = run_analyses(trace_set(DATA / "hta_ns_resolution_rank0"), names=["kernel_sequences"])
    table = result["kernel_sequences"].table("frequent_kernel_sequences")
    assert len(table.rows) == 5 and result["kernel_sequences"].value(0, "patterns") == 25.0
