"""A rule carries its own simulator scenarios and truth (simulator.rule_scenarios): P4's reach
the planner and the truth records with no entry in scenarios.py or truth.py; the simulated
training steps carry the FLOPs the scenario designs; an attached job (the demo's CPU trainer)
holds host 0's last GPU and no simulated job is placed on it."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from analyzers.rules.p04_low_mfu import LOW_MFU, PEER_MFU, LowMfu
from simulator.fleet import Fleet, FleetSpec
from simulator.levels import BUSY
from simulator.rule_scenarios import SimulatedJob, fleet_rules, simulations
from simulator.scenarios import _BUILTIN, SCENARIOS, StepProfile
from simulator.sim import FleetSimulator

ORIGIN = 1_740_960_000


def test_the_rules_scenarios_join_the_builtin_ones() -> None:
    assert {"flops_reported", "low_mfu"} <= set(SCENARIOS) - set(_BUILTIN)
    low = SCENARIOS["low_mfu"]
    assert (low.main, low.steps, low.intended) == (BUSY, StepProfile(mfu=LOW_MFU), ("P4",))
    assert LowMfu.simulation in simulations()  # read from the installed rule, as data


def _job(job_id: str, team: str, mfu: float, *, mig: bool = False) -> SimulatedJob:
    scenario = "low_mfu" if mfu == LOW_MFU else "flops_reported"
    return SimulatedJob(job_id, team, "NVIDIA H100 80GB HBM3", mig, scenario, mfu, 2.0)


def test_p4s_truth_compares_each_job_with_its_teams_median() -> None:
    (rule,) = [r for r in fleet_rules() if r.rule_id == "P4"]
    team = [_job("a", "nlp", PEER_MFU), _job("b", "nlp", PEER_MFU), _job("slow", "nlp", LOW_MFU)]
    # 2 GPUs for an hour of training, at 8 % where the median is 40 %
    assert rule.verdicts(team) == {"slow": pytest.approx(2 * (1 - LOW_MFU / PEER_MFU))}
    assert rule.verdicts(team[1:]) == {}  # two jobs: no median to compare with
    other_team = [*team[:2], _job("slow", "vision", LOW_MFU)]
    assert rule.verdicts(other_team) == {}
    on_mig = [*team[:2], _job("slow", "nlp", LOW_MFU, mig=True)]
    assert rule.verdicts(on_mig) == {}  # no peak for a MIG slice: no measured MFU


def test_simulated_steps_carry_the_designed_flops_and_the_truth_holds_p4() -> None:
    sim = FleetSimulator(FleetSpec(hosts=6, seed=1838), origin_s=ORIGIN, horizon_s=8 * 3600)
    records = {r["job_id"]: r for r in sim.truth_records()}
    low = [j for j, r in records.items() if "P4" in r["rules"]]
    assert low and all(records[j]["scenario"] == "low_mfu" for j in low)
    peer = next(
        j
        for j in sim.fleet.jobs
        if j.scenario.name == "flops_reported" and not sim.fleet.hosts[j.placements[0].host].mig
    )
    middle = (peer.start_s + peer.end_s) // 2
    steps = sim.tables(middle, middle + 60, 10)["step_samples"]
    assert peer.job_id in with_flops_of(steps)
    job_scenario = {j.job_id: j.scenario.name for j in sim.fleet.jobs}
    with_flops = with_flops_of(steps)
    assert with_flops and {job_scenario[j] for j in with_flops} <= {"flops_reported", "low_mfu"}
    assert set(steps.filter(pc.is_valid(steps["flops_per_step"]))["compute_dtype"].to_pylist()) == {
        "bf16"
    }


def with_flops_of(steps: pa.Table) -> set[str]:
    return set(steps.filter(pc.is_valid(steps["flops_per_step"]))["job_id"].to_pylist())


def test_an_attached_job_holds_host_0s_last_gpu_alone() -> None:
    fleet = Fleet(FleetSpec(hosts=4, seed=7, attached_job="demo/cpu-trainer"), ORIGIN, 6 * 3600)
    (attached,) = [j for j in fleet.jobs if j.job_id == "demo/cpu-trainer"]
    (placement,) = attached.placements
    assert (placement.host, placement.pod, attached.team) == (0, "cpu-trainer-0", "demo")
    assert fleet.units[placement.units[0]].gpu_index == 7
    others = [j for j in fleet.jobs if j is not attached]
    assert all(placement.units[0] not in p.units for j in others for p in j.placements)
