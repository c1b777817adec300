"""`fleetscope eval` at a small scale in CI: every simulated rule at precision and recall >= 0.95
and wasted GPU-hours within 10 % of the simulator's truth, through the real pipeline."""

from __future__ import annotations

import pytest

from analyzers.evaluation import evaluate, render


@pytest.mark.slow
def test_every_simulated_rule_meets_the_quality_targets() -> None:
    report = evaluate(hosts=6, hours=8, seed=11)
    text = render(report)
    assert report.jobs >= 40, text
    simulated = {r for r, s in report.scores.items() if s.tp + s.fn}
    assert {"R1", "R2", "R3", "R6", "R7", "R8", "R11", "R12", "P1", "P3"} <= simulated, text
    assert report.passed, text
