"""Trace rules and beyond-HTA analyses on real traces: the ResNet-50 num_workers=0 trace is
data-loader bound (T8, critical) and the num_workers=4 one is not; what-if prices the fix."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from analyzers.findings import Finding, Severity
from analyzers.traces.analyses.base import TraceOptions
from analyzers.traces.api import TraceReport, analyze_trace, run_analyses
from analyzers.traces.findings import trace_findings
from tests.analyzers.traces.trace_paths import DATA, EDGE_TRACES, MAIN_TRACES, trace_set


@pytest.fixture(scope="module")
def nw0() -> TraceReport:
    return analyze_trace(DATA / "kineto_resnet50_nw0", job_id="resnet-nw0")


@pytest.fixture(scope="module")
def nw4() -> TraceReport:
    return analyze_trace(DATA / "kineto_resnet50_nw4")


def _rules(report: TraceReport) -> dict[str, Finding]:
    return {f.rule_id: f for f in report.findings if isinstance(f, Finding)}


def test_num_workers_0_is_data_loader_bound(nw0: TraceReport) -> None:
    share = nw0.results["dataloader"].value(0, "share")
    assert share == pytest.approx(415791 / 1048976)  # 6 steps, DataLoader __next__ per step
    t8 = _rules(nw0)["T8"]
    assert t8.severity is Severity.CRITICAL
    assert t8.job_id == "resnet-nw0"
    assert t8.evidence["share"] == pytest.approx(share)
    assert [s["step"] for s in t8.evidence["steps"]] == [5, 6, 7, 8, 9, 10]
    assert "num_workers" in t8.recommendation
    assert t8.window_start == datetime(2021, 6, 8, 8, 57, 3, 460072, tzinfo=UTC)
    # The replay removes ~34 % of the step time; one GPU all week.
    assert t8.wasted_gpu_hours == pytest.approx(0.339 * 168, rel=0.01)


def test_num_workers_4_is_not(nw4: TraceReport) -> None:
    assert nw4.results["dataloader"].value(0, "share") == pytest.approx(8522 / 838152)
    assert "T8" not in _rules(nw4)


def test_both_copy_from_pageable_memory_and_skip_tensor_cores(
    nw0: TraceReport, nw4: TraceReport
) -> None:
    for report in (nw0, nw4):
        rules = _rules(report)
        assert rules["T6"].evidence["copies"] == 12
        assert rules["T10"].evidence["compute_capability"] == 7.0  # V100, FP32 training


def test_whatif_baseline_replays_the_trace(nw0: TraceReport) -> None:
    """With nothing changed, the replayed step time is the measured one (within 2 %)."""
    table = nw0.results["whatif"].table("whatif").records()
    measured = nw0.results["steps"].value(0, "mean_step_us")
    assert table[0]["baseline_step_us"] == pytest.approx(measured, rel=0.02)
    by_name = {row["scenario"]: row for row in table}
    assert by_name["no_dataloader_wait"]["estimated_step_us"] < 0.7 * measured
    assert by_name["no_sync"]["saved_fraction"] < 0.01


def test_custom_allreduce_counts_as_communication_natively() -> None:
    """vLLM's multimem all-reduce: HTA calls it compute; fleetscope calls it communication."""
    trace_dir = DATA / "tracelens_b200_eager"
    hta = run_analyses(trace_set(trace_dir, hta_compatible=True), names=["comm_comp_overlap"])
    ours = run_analyses(trace_set(trace_dir), names=["comm_comp_overlap"])
    assert hta["comm_comp_overlap"].value(0, "communication_us") == 21.0
    assert ours["comm_comp_overlap"].value(0, "communication_us") > 1000.0


@pytest.mark.parametrize("trace_dir", MAIN_TRACES + EDGE_TRACES, ids=lambda p: p.name)
def test_every_trace_analyzes_in_both_modes(trace_dir: Path) -> None:
    for hta in (False, True):
        trace = trace_set(trace_dir, hta_compatible=hta)
        results = run_analyses(trace)
        assert len(results) == 24
        for finding in trace_findings(trace, results, TraceOptions()):
            assert finding.recommendation and finding.evidence["rank"] in trace.ranks


def test_cpu_only_trace_gets_a_clear_result() -> None:
    report = analyze_trace(EDGE_TRACES[0])
    assert "cpu_only" in EDGE_TRACES[0].name
    assert report.results["temporal_breakdown"].notes == (
        "rank 34: no GPU activity in the trace (CPU-only)",
    )
    assert report.findings == []
