"""Est. SM efficiency and rule T13 (grids smaller than the GPU) on real traces: the analysis's
numbers are computed again here from the raw JSON (each kernel's `blocks per SM`, the A100's 108
SMs); T13 fires on the recsys trace, whose small reductions leave a tenth of the SMs idle, and
not on the ResNet-50 or AMD traces; without `numSms` the finding says nothing about SMs."""

from __future__ import annotations

import gzip
import json
import math
from collections import defaultdict
from pathlib import Path

import pytest

from analyzers.findings import Finding
from analyzers.traces.api import analyze_trace
from analyzers.traces.classify import KernelClass, classify_fleetscope
from tests.analyzers.traces.trace_paths import DATA

RECSYS = DATA / "hta_trace_diff_control_rank3"  # A100, rank 3 of 8


def _t13(trace_dir: Path) -> list[Finding]:
    report = analyze_trace(trace_dir)
    return [f for f in report.findings if isinstance(f, Finding) and f.rule_id == "T13"]


def test_the_numbers_are_the_raw_kernels_blocks_per_sm() -> None:
    doc = json.loads(gzip.decompress((RECSYS / "control.json.gz").read_bytes()))
    sms = doc["deviceProperties"][0]["numSms"]
    kernels = [
        (e["name"], e["dur"], e["args"]["blocks per SM"])
        for e in doc["traceEvents"]
        if e.get("cat") == "kernel"
        and e["args"]["blocks per SM"] > 0
        and classify_fleetscope(e["name"]) is KernelClass.COMPUTATION
    ]
    by_name: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for name, dur, bps in kernels:
        if bps < 1:
            by_name[name].append((dur, bps))
    idle = {n: math.fsum(d * (1 - b) for d, b in calls) for n, calls in by_name.items()}
    top = sorted(by_name, key=lambda n: -idle[n])[:10]

    result = analyze_trace(RECSYS).results["sm_efficiency"]
    kernel_us = math.fsum(d for _, d, _ in kernels)
    assert sms == 108 and len(kernels) == 8508
    assert result.per_rank[3] == pytest.approx(
        {
            "kernels": len(kernels),
            "kernel_us": kernel_us,
            "sm_count": sms,
            "sm_efficiency": math.fsum(d * min(b, 1) for _, d, b in kernels) / kernel_us,
            "underfilled_us": math.fsum(d for calls in by_name.values() for d, _ in calls),
            "idle_sm_us": math.fsum(idle.values()),
        },
        rel=1e-12,
    )
    assert result.table("sm_efficiency").rows == ((3, *result.per_rank[3].values()),)
    expected = [
        (
            3,
            name,
            len(by_name[name]),
            math.fsum(d for d, _ in by_name[name]),
            math.fsum(b for _, b in by_name[name]) / len(by_name[name]) * sms,
            idle[name],
        )
        for name in top
    ]
    rows = result.table("underfilled_kernels").rows
    assert [row[:3] for row in rows] == [row[:3] for row in expected]
    assert [row[3:] for row in rows] == [pytest.approx(row[3:], rel=1e-12) for row in expected]


def test_t13_names_the_sms_and_the_kernels_that_leave_them_idle() -> None:
    (t13,) = _t13(RECSYS)
    assert t13.title == "rank 3: kernels leave 10% of the 108 SMs idle (grids smaller than the GPU)"
    assert t13.evidence["idle_sm_share"] == pytest.approx(0.1026, abs=1e-4)
    assert t13.evidence["sm_count"] == 108
    first = t13.evidence["kernels"][0]
    assert first["name"].startswith("void at::native::reduce_kernel<128, 4")
    assert (first["calls"], first["blocks"]) == (486, "26.9 on 108 SMs")
    assert "CUDA graphs do not help" in t13.recommendation


@pytest.mark.parametrize("trace_dir", ["kineto_resnet50_nw0", "hta_amd_mi250_minitoy"])
def test_t13_is_quiet_on_full_grids_and_on_traces_without_blocks_per_sm(trace_dir: str) -> None:
    assert _t13(DATA / trace_dir) == []


def test_the_amd_trace_records_no_blocks_per_sm_and_says_so() -> None:
    result = analyze_trace(DATA / "hta_amd_mi250_minitoy").results["sm_efficiency"]
    assert result.per_rank == {}
    assert all(table.rows == () for table in result.tables)
    assert result.notes == ("rank 0: no computation kernel records `blocks per SM`",)


def test_without_num_sms_t13_says_nothing_of_sms() -> None:
    """The 2021 inference fragment has blocks per SM but no deviceProperties."""
    (t13,) = _t13(DATA / "edge_cases" / "trace_file_list_inference_rank_1")
    assert t13.title == "rank 1: kernels leave 36% of the GPU idle (grids smaller than the GPU)"
    assert "sm_count" not in t13.evidence
    assert all(set(k) == {"name", "calls", "idle_sm_us"} for k in t13.evidence["kernels"])
