"""`fleetscope eval` at a small scale in CI: every rule of the catalog at precision and recall
>= 0.95 and wasted GPU-hours within 10 % of the simulator's truth, through the real pipeline.

The fleet (6 hosts, 8 hours, seed 1838) is one whose truth holds every telemetry and pipeline
rule: small fleets have few whole-node jobs, and R5 (an inference service on >= 4 whole GPUs for
> 24 GPU-hours), R10 (an I/O-bound job filling its hosts) and R15 (an 8-GPU job split over two
hosts) need them. When the simulator changes, `test_the_ci_fleet_holds_every_rule` says so
before the slow run does; pick another seed then (most 6-host seeds miss one of them).
"""

from __future__ import annotations

from collections import Counter

import pytest

from app.evaluation import evaluate, render
from simulator.fleet import FleetSpec
from simulator.sim import FleetSimulator

HOSTS, HOURS, SEED = 6, 8, 1838
ORIGIN = 1_740_960_000  # evaluate()'s origin
EVERY_RULE = {
    "R1", "R2", "R3", "R4", "R5", "R6", "R7", "R8", "R9", "R10", "R11", "R12", "R13", "R14",
    "R15", "R16", "R17", "P1", "P2", "P3", "P4",
}  # fmt: skip


def test_the_ci_fleet_holds_every_rule() -> None:
    sim = FleetSimulator(FleetSpec(hosts=HOSTS, seed=SEED), origin_s=ORIGIN, horizon_s=HOURS * 3600)
    records = sim.truth_records()
    g0 = min(r["start_ts"] for r in records) // 10 * 10
    g1 = ORIGIN + HOURS * 3600
    scored = [r for r in records if r["start_ts"] >= g0 and r["end_ts"] <= g1]
    found = Counter(rule for r in scored for rule in r["rules"])
    found.update(rule for u in sim.user_truth_records(g0, g1) for rule in u["rules"])
    assert set(found) == EVERY_RULE, sorted(EVERY_RULE - set(found))


# The whole pipeline over 738 k GPU samples: about 4 min on a 2-core machine at load 20 (most of it
# per-query cost in the analyzers and the sketch tiers, so fewer samples barely shorten it: every
# 20 s instead of 10 s took 214 s and missed the targets). The suite-wide 300 s cut it in the middle
# of a DuckDB query; this test's own limit is what it needs on a busy machine.
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_every_rule_meets_the_quality_targets() -> None:
    report = evaluate(hosts=HOSTS, hours=HOURS, seed=SEED)
    text = render(report)
    assert report.jobs >= 80, text
    simulated = {r for r, s in report.scores.items() if s.tp + s.fn}
    assert simulated == EVERY_RULE, text
    assert report.not_simulated == [], text
    assert not report.ambiguous_users, text
    assert report.passed, text
    # issue 32's P4 (low MFU against the team median), exactly: both low-MFU jobs whose team had
    # a median to compare with are found, and no other job
    p4 = report.scores["P4"]
    assert (p4.tp, p4.fp, p4.fn, p4.precision, p4.recall) == (2, 0, 0, 1.0, 1.0), text
    # each job's top finding names its scenario's cause (analyzers.rules.causes, issue 13); this
    # fleet's truth holds a cause for 50 jobs (60 in seed 303's, before P4's scenarios)
    assert report.root_accuracy == 1.0 and report.root_correct >= 50, text
