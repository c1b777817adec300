"""A showcase job (FleetSpec.showcase, `simulate --showcase`, the demo's data-loader stall): one
simulated job of the named scenario holds host 0's first GPU for the whole range, whatever the
seed, so that a demo starting at any moment has a job that P1 finds from its first steps; the
rest of the fleet is the plan without it, less the jobs that would have used that GPU."""

from __future__ import annotations

import pytest

from app.demo import SHOWCASE_SCENARIO
from fleetscope.errors import ConfigError
from simulator.fleet import Fleet, FleetSpec
from simulator.sim import FleetSimulator

ORIGIN = 1_740_960_000
HORIZON_S = 6 * 3600


@pytest.mark.parametrize("seed", [1, 7, 42])
def test_the_showcase_job_runs_on_host_0s_first_gpu_all_along(seed: int) -> None:
    spec = FleetSpec(hosts=4, seed=seed, attached_job="demo/cpu-trainer", showcase="memory_leak")
    fleet = Fleet(spec, ORIGIN, HORIZON_S)
    (showcase,) = [
        j
        for j in fleet.jobs
        if j.scenario.name == "memory_leak"
        and j.start_s < ORIGIN
        and j.end_s >= ORIGIN + HORIZON_S
        and j.placements[0].host == 0
        and fleet.units[j.placements[0].units[0]].gpu_index == 0
    ]
    (placement,) = showcase.placements
    assert showcase.job_id == f"{showcase.team}/{showcase.name}"  # host 0 is Kubernetes
    assert placement.pod == f"{showcase.name}-0"
    others = [j for j in fleet.jobs if j is not showcase]
    assert all(placement.units[0] not in p.units for j in others for p in j.placements)
    assert [j.index for j in fleet.jobs] == list(range(len(fleet.jobs)))


def test_the_rest_of_the_fleet_is_the_plan_less_the_jobs_on_its_gpu() -> None:
    plain = Fleet(FleetSpec(hosts=4, seed=7), ORIGIN, HORIZON_S)
    shown = Fleet(FleetSpec(hosts=4, seed=7, showcase=SHOWCASE_SCENARIO), ORIGIN, HORIZON_S)
    unit = shown.jobs[-1].placements[0].units[0]
    kept = [j for j in plain.jobs if all(unit not in p.units for p in j.placements)]
    assert [(j.job_id, j.placements) for j in shown.jobs[:-1]] == [
        (j.job_id, j.placements) for j in kept
    ]


def test_the_demos_showcase_is_a_job_p1_finds() -> None:
    sim = FleetSimulator(
        FleetSpec(hosts=4, seed=7, showcase=SHOWCASE_SCENARIO), origin_s=ORIGIN, horizon_s=HORIZON_S
    )
    showcase = sim.fleet.jobs[-1]
    (truth,) = [r for r in sim.truth_records() if r["job_id"] == showcase.job_id]
    assert (truth["scenario"], truth["designed"]["data_wait_share"]) == ("data_loader_stall", 0.4)
    assert "P1" in truth["rules"]


@pytest.mark.parametrize("scenario", ["no_such_scenario", "straggler", "host_move"])
def test_a_showcase_that_cannot_hold_one_gpu_is_refused(scenario: str) -> None:
    with pytest.raises(ConfigError, match=f"showcase scenario '{scenario}'"):
        Fleet(FleetSpec(hosts=4, seed=7, showcase=scenario), ORIGIN, HORIZON_S)
