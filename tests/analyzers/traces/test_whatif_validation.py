"""The what-if replay against real pairs of traces: the estimate from one trace of a pair is
within 10 % of the other's measured step time, inside the scenario's interval where the change
is real, and every scenario states its assumptions (issue 18). One test records a fresh pair
with the real torch.profiler and validates it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analyzers.traces.analyses.base import TraceOptions
from analyzers.traces.analyses.replay import Change, Replay, outermost
from analyzers.traces.analyses.whatif import SCENARIOS
from analyzers.traces.api import TraceReport, analyze_trace
from bench.whatif import Pair, pairs, validate
from tests.analyzers.traces.trace_paths import DATA, trace_set

CPU_PAIRS = Path(__file__).resolve().parents[2] / "data" / "whatif_pairs" / "cpu_cnn"


@pytest.fixture(scope="module")
def nw0() -> TraceReport:
    return analyze_trace(DATA / "kineto_resnet50_nw0")


@pytest.mark.parametrize("pair", pairs([CPU_PAIRS]), ids=lambda p: p.name)
def test_estimate_is_within_ten_percent_of_the_measured_pair(pair: Pair) -> None:
    outcome = validate(pair)
    assert abs(outcome.error) <= 0.10, outcome
    assert outcome.low_us <= outcome.estimated_us <= outcome.high_us


def test_resnet50_workers_estimate_beats_removing_the_wait() -> None:
    """The issue's measurement: removing the wait alone predicted 117 ms for a measured 139.7 ms
    (-16 %); the workers scenario (residual dequeue + CPU contention) lands within 10 % and its
    interval holds the measurement: the assumptions' pessimistic end, the converged fixed point,
    is 139.5 ms, and the sampling error of a 6-step mean moves it out to 143.2 ms."""
    outcome = validate(pairs([])[0])
    assert outcome.measured_us == pytest.approx(139692.0)
    assert outcome.peer_error < -0.15
    assert -0.10 <= outcome.error <= 0.0
    assert outcome.low_us <= outcome.measured_us <= outcome.high_us


def test_the_step_interval_holds_two_standard_errors_of_the_mean_step(nw0: TraceReport) -> None:
    """ResNet-50, 0 workers: 6 ProfilerSteps of 164-181 ms. Removing the wait is one change at
    every level of its assumptions, so its step interval is the sampling error alone: the
    estimate times 1 -/+ 2 standard errors of the mean step; its savings' interval is one point
    (both replays read the same steps)."""
    durations = [r["duration_us"] for r in nw0.results["steps"].table("steps").records()]
    assert len(durations) == 6
    relative_se = float(np.std(durations, ddof=1)) / float(np.mean(durations)) / np.sqrt(6)
    row = {r["scenario"]: r for r in nw0.results["whatif"].table("whatif").records()}[
        "no_dataloader_wait"
    ]
    assert row["estimated_low_us"] == pytest.approx(
        row["estimated_step_us"] * (1 - 2 * relative_se)
    )
    assert row["estimated_high_us"] == pytest.approx(
        row["estimated_step_us"] * (1 + 2 * relative_se)
    )
    assert row["saved_low"] == row["saved_fraction"] == row["saved_high"]


def test_amp_on_fp32_resnet50_saves_gpu_time_but_not_a_cpu_bound_step(nw0: TraceReport) -> None:
    """fp32 V100 ResNet-50: AMP halves the GPU's busy time (convolutions to tensor cores,
    elementwise at half the bytes), but the step is bound by the data loader on the CPU, so the
    step saving appears only together with the data-loader fix."""
    rows = {r["scenario"]: r for r in nw0.results["whatif"].table("whatif").records()}
    amp = rows["amp"]
    assert 0.45 < amp["gpu_busy_saved_fraction"] < 0.70
    assert amp["saved_fraction"] < 0.05
    both = rows["dataloader_workers+amp"]
    assert both["estimated_step_us"] < rows["dataloader_workers"]["estimated_step_us"] * 1.05
    assert both["estimated_low_us"] < rows["dataloader_workers"]["estimated_low_us"]


def test_every_scenario_states_assumptions_and_an_interval(nw0: TraceReport) -> None:
    records = nw0.results["whatif"].table("whatif").records()
    assert {r["scenario"] for r in records} >= {
        "no_dataloader_wait", "dataloader_workers", "amp", "fused_optimizer", "cuda_graphs",
    }  # fmt: skip
    for row in records:
        assert row["assumptions"] == SCENARIOS[row["scenario"]].assumptions
        assert row["estimated_low_us"] <= row["estimated_step_us"] <= row["estimated_high_us"]
        assert row["saved_low"] <= row["saved_fraction"] <= row["saved_high"]


def test_communication_bandwidth_scenario_shortens_collectives() -> None:
    """A DDP rank with NCCL kernels: doubling bandwidth never lengthens the step."""
    report = analyze_trace(DATA / "hta_nccl_data_rank0")
    rows = {r["scenario"]: r for r in report.results["whatif"].table("whatif").records()}
    comm = rows["comm_bandwidth"]
    assert comm["estimated_step_us"] <= comm["baseline_step_us"]
    assert comm["gpu_busy_saved_fraction"] > 0.0


def test_unchanged_replay_with_a_neutral_warp_is_the_baseline() -> None:
    """Warping CPU intervals by 1.0 and scaling by 1.0 changes nothing (the clock is exact)."""
    frame = trace_set(DATA / "kineto_resnet50_nw0").ranks[0]
    replay = Replay(frame, TraceOptions())
    rows = np.flatnonzero(frame.stream == -1)[:50]
    s, e = outermost(frame.ts[rows], frame.end[rows])
    neutral = Change(cpu_warp=(s, e, np.ones(len(s))), cpu_scale=1.0)
    assert replay.step_time(neutral) == pytest.approx(replay.step_time(Change()))


def test_outermost_keeps_only_the_enclosing_rows() -> None:
    start = np.array([0.0, 1.0, 5.0, 6.0, 20.0])
    end = np.array([10.0, 3.0, 8.0, 12.0, 25.0])
    s, e = outermost(start, end)
    assert s.tolist() == [0.0, 20.0]
    assert e.tolist() == [12.0, 25.0]


def test_a_fresh_torch_profiler_recording_validates(tmp_path: Path) -> None:
    """Real PyTorch, real torch.profiler: record base and pinned (2 steps), and the model says
    what the run shows: pin_memory without an accelerator changes nothing the trace can see."""
    from bench.whatif_record import record

    for variant in ("base", "pinned"):
        record(tmp_path, variant, 2)
    outcome = validate(Pair("fresh", tmp_path / "base", tmp_path / "pinned", "pinned_copies", None))
    assert outcome.estimated_us == outcome.low_us == outcome.high_us  # no copies: no change
    assert outcome.measured_us > 0


def test_t10_says_why_amp_saves_gpu_time_but_no_gpu_hours(nw0: TraceReport) -> None:
    (t10,) = [f for f in nw0.findings if getattr(f, "rule_id", "") == "T10"]
    assert t10.evidence["amp_gpu_busy_saved_fraction"] > 0.45
    assert "bound by the CPU" in t10.estimate_method
