"""The ground truth is honest: what it says should fire does fire on the generated samples, its
wasted GPU-hours follow the stated formulas, and jobs carry the agent's job-id convention."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pyarrow.compute as pc
import pytest

from collector.attribution.labels import k8s_job_id
from collector.simulator.fleet import FleetSpec
from collector.simulator.scenarios import SCENARIOS
from collector.simulator.sim import FleetSimulator
from collector.simulator.truth import RULES, JobShape, ambiguous_rules, job_stats, verdicts

from .conftest import T0

H100 = {"fb_total_mib": 81559, "compute_capability": 9.0, "sm_clock_max_mhz": 1980}


def shape(name: str, n_gpus: int, hours: float) -> JobShape:
    return JobShape(SCENARIOS[name], n_gpus, hours * 3600, max_nodes=1, **H100)


def test_data_loader_stall_wastes_its_data_wait_share_of_the_gpu_hours() -> None:
    waste = verdicts(job_stats(shape("data_loader_stall", 8, 2.0)))
    assert waste["P1"] == pytest.approx(0.4 * 16)
    assert set(waste) == {"P1", "P3", "R11", "R6"}


def test_idle_allocation_is_r1_and_after_an_hour_r3_with_every_gpu_hour_wasted() -> None:
    assert verdicts(job_stats(shape("idle_allocation", 4, 0.5))) == {"R1": 2.0}
    assert verdicts(job_stats(shape("idle_allocation", 4, 2.0))) == {"R1": 8.0, "R3": 8.0}


def test_hard_negatives_fire_nothing() -> None:
    for name in ("healthy", "periodic_eval", "no_profiling", "host_move"):
        assert verdicts(job_stats(shape(name, 8, 4.0))) == {}, name
    # an 8-minute checkpoint load is neither R1 nor R3; on a long job not even R11
    assert verdicts(job_stats(shape("checkpoint_load_start", 8, 4.0))) == {}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_scenario_triggers_what_it_is_built_for(name: str) -> None:
    scenario = SCENARIOS[name]
    n = max(scenario.min_gpus, 8)
    fires = set(verdicts(job_stats(shape(name, n, 3.0))))
    assert set(scenario.intended) <= fires
    assert not ambiguous_rules(shape(name, n, 3.0))


def test_truth_records_name_hosts_gpus_and_formulas(sim: FleetSimulator) -> None:
    records = sim.truth_records(T0, T0 + 86_400)
    assert records
    for record in records:
        assert set(record["wasted_gpu_hours"]) == set(record["rules"]) == set(record["how"])
        assert record["gpu_hours"] == pytest.approx(
            sum(g["end_ts"] - g["start_ts"] for g in record["gpus"]) / 3600
        )
        hosts = {g["host"] for g in record["gpus"]}
        assert hosts == set(record["hosts"])
        if record["scenario"] == "host_move":
            assert len(hosts) == 2
        if record["scheduler"] == "slurm":
            assert re.fullmatch(r"\d+", record["job_id"])
        else:
            assert record["team"].startswith("team-") and record["job_id"].startswith(
                record["team"] + "/"
            )
    ids = [r["job_id"] for r in sim.job_records()]
    assert len(ids) == len(set(ids))


def test_k8s_pod_names_map_back_to_the_job_id(sim: FleetSimulator) -> None:
    for job in sim.fleet.jobs:
        for placement in job.placements:
            if job.scheduler == "k8s":
                assert placement.pod and k8s_job_id(job.team, placement.pod) == job.job_id
            else:
                assert placement.pod is None


def test_every_scenario_appears_in_a_week_of_a_16_host_fleet() -> None:
    fleet = FleetSimulator(FleetSpec(hosts=16, seed=7), origin_s=T0, horizon_s=7 * 86_400)
    assert {j.scenario.name for j in fleet.fleet.jobs} == set(SCENARIOS)


def test_the_truth_holds_on_the_generated_samples(sim: FleetSimulator) -> None:
    """Recompute each job's statistics from its gpu_samples rows and re-run the rules on them."""
    t0, t1 = T0, T0 + 86_400
    gpu = sim.tables(t0, t1, 10)["gpu_samples"]
    job_col = gpu["job_id"]
    checked: dict[str, int] = {}
    for job in sim.fleet.jobs:
        if not (t0 <= job.start_s and job.end_s <= t1):
            continue
        rows = gpu.filter(pc.equal(job_col, job.job_id))
        util = rows["gpu_util"].to_numpy(zero_copy_only=False)
        designed = job_stats(sim.fleet.shape(job))
        per_gpu = [
            float(np.mean(util[(rows["gpu_uuid"].to_numpy(zero_copy_only=False) == uuid)]))
            for uuid in dict.fromkeys(rows["gpu_uuid"].to_pylist())
        ]
        sm = rows["sm_active"]
        observed = dataclasses.replace(
            designed,
            util_mean=float(np.mean(util)),
            util_p5=float(np.percentile(util, 5)),
            util_p95=float(np.percentile(util, 95)),
            rank_util_means=tuple(per_gpu),
            sm_mean=None if sm.null_count == len(sm) else pc.mean(sm).as_py(),
            tensor_mean=pc.mean(rows["tensor_active"]).as_py(),
            dram_mean=pc.mean(rows["dram_active"]).as_py(),
        )
        assert abs(observed.util_mean - designed.util_mean) < 3.0, job.scenario.name
        if designed.sm_mean is None:
            assert sm.null_count == len(sm)
        else:
            assert observed.sm_mean is not None
            assert abs(observed.sm_mean - designed.sm_mean) < 0.03, job.scenario.name
        assert set(verdicts(observed)) == set(verdicts(designed)), job.scenario.name
        thermal = rows["thermal_violation_us"].to_numpy(zero_copy_only=False)
        uuids = rows["gpu_uuid"].to_numpy(zero_copy_only=False)
        rising = {bool(np.ptp(thermal[uuids == uuid]) > 0) for uuid in set(uuids)}
        assert rising == {job.scenario.throttle is not None}, job.scenario.name
        xid = rows["xid_last"].to_numpy(zero_copy_only=False)
        assert (xid.max() == 48) == (job.scenario.xid is not None)
        checked[job.scenario.name] = checked.get(job.scenario.name, 0) + 1
    assert sum(checked.values()) >= 20 and len(checked) >= 8


def test_rules_without_a_scenario_are_documented_not_simulated() -> None:
    assert set(RULES) == {
        "R1", "R2", "R3", "R5", "R6", "R7", "R8", "R9", "R11", "R12", "R14", "R15", "R16",
        "R17", "P1", "P3",
    }  # fmt: skip
