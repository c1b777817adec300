"""The ground truth is honest: what it says should fire does fire on the generated samples, its
wasted GPU-hours follow the stated formulas, and jobs carry the agent's job-id convention."""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from fleetscope.attribution.labels import k8s_job_id
from simulator.fleet import FleetSpec
from simulator.rule_scenarios import fleet_rules
from simulator.scenarios import SCENARIOS, RandomBlocks
from simulator.sim import FleetSimulator
from simulator.truth import RULES, JobShape, ambiguous_rules, job_stats, verdicts

from .conftest import T0

H100: dict[str, Any] = {"fb_total_mib": 81559, "compute_capability": 9.0, "sm_clock_max_mhz": 1980}


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
    fires = set(verdicts(job_stats(shape(name, n, 4.0))))
    # a rule that compares a job with others (P4: its team's median) is judged over a fleet
    # (tests/simulator/test_rule_scenarios.py), not on one job
    compared = {rule.rule_id for rule in fleet_rules()}
    assert set(scenario.intended) - compared <= fires
    assert not ambiguous_rules(shape(name, n, 4.0))


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
        fb = pc.divide(
            rows["fb_used_mib"], pc.add(rows["fb_used_mib"], rows["fb_free_mib"])
        ).to_numpy(zero_copy_only=False)
        ts = pc.cast(rows["ts"], pa.int64()).to_numpy(zero_copy_only=False) / 1000.0
        units = np.array(
            [
                f"{u}/{m}"
                for u, m in zip(
                    rows["gpu_uuid"].to_pylist(), rows["mig_instance_id"].to_pylist(), strict=True
                )
            ]
        )
        fb_windows = []
        for unit in dict.fromkeys(units):
            mine = units == unit
            t_gpu = ts[mine]
            window = np.minimum(((t_gpu - t_gpu.min()) / np.ptp(t_gpu) * 10).astype(int), 9)
            fb_windows.append(tuple(float(np.mean(fb[mine][window == w])) for w in range(10)))
        observed = dataclasses.replace(
            designed,
            fb_windows=tuple(fb_windows),
            util_mean=float(np.mean(util)),
            util_p5=float(np.percentile(util, 5)),
            util_p95=float(np.percentile(util, 95)),
            rank_util_means=tuple(per_gpu),
            sm_mean=None if sm.null_count == len(sm) else pc.mean(sm).as_py(),
            tensor_mean=pc.mean(rows["tensor_active"]).as_py(),
            dram_mean=pc.mean(rows["dram_active"]).as_py(),
        )
        # random blocks seen on a 10 s grid: the sampled share has a standard error
        times = len(util) / job.n_gpus
        alt = job.scenario.alternation
        spread = 0.0
        if isinstance(alt, RandomBlocks):
            spread = np.sqrt(alt.share * (1 - alt.share) / times)
        gap = abs(job.scenario.main.util_pct - alt.level.util_pct) if alt else 0.0
        sm_gap = abs(job.scenario.main.sm_active - alt.level.sm_active) if alt else 0.0
        assert abs(observed.util_mean - designed.util_mean) < max(3.0, 4 * spread * gap), (
            job.scenario.name
        )
        if designed.sm_mean is None:
            assert sm.null_count == len(sm)
        else:
            assert observed.sm_mean is not None
            assert abs(observed.sm_mean - designed.sm_mean) < max(0.03, 4 * spread * sm_gap), (
                job.scenario.name
            )
        assert set(verdicts(observed)) == set(verdicts(designed)), job.scenario.name
        thermal = rows["thermal_violation_us"].to_numpy(zero_copy_only=False)
        uuids = rows["gpu_uuid"].to_numpy(zero_copy_only=False)
        rising = {bool(np.ptp(thermal[uuids == uuid]) > 0) for uuid in set(uuids)}
        assert rising == {job.scenario.throttle is not None}, job.scenario.name
        xid = rows["xid_last"].to_numpy(zero_copy_only=False)
        assert (xid.max() == 48) == (job.scenario.xid is not None)
        checked[job.scenario.name] = checked.get(job.scenario.name, 0) + 1
    assert sum(checked.values()) >= 20 and len(checked) >= 8


def test_every_telemetry_and_pipeline_rule_has_a_truth() -> None:
    """Per job in RULES; R4 (per user) in users.py."""
    assert set(RULES) == {
        "R1", "R2", "R3", "R5", "R6", "R7", "R8", "R9", "R10", "R11", "R12", "R13", "R14",
        "R15", "R16", "R17", "P1", "P2", "P3",
    }  # fmt: skip


def test_a_cpu_bottleneck_wastes_its_starved_share_and_is_not_an_io_bottleneck() -> None:
    waste = verdicts(job_stats(shape("cpu_bottleneck", 8, 2.0)))
    assert set(waste) == {"R9", "P1", "R11", "R6"}
    assert waste["R9"] == pytest.approx(16 * 0.7)


def test_io_wait_is_host_wide_so_only_a_job_filling_its_hosts_shows_r10() -> None:
    whole = verdicts(job_stats(shape("io_bottleneck", 8, 2.0)))
    assert set(whole) == {"R10", "P1", "R11", "R6"}
    assert whole["R10"] == pytest.approx(16 * 0.7)
    # half a host: the other half's idle cores dilute the host's I/O wait to about 36 %
    assert "R10" not in verdicts(job_stats(shape("io_bottleneck", 4, 2.0)))
    spread = JobShape(SCENARIOS["io_bottleneck"], 8, 7200, max_nodes=2, **H100)
    assert set(verdicts(job_stats(spread))) == {"P1", "R11", "R6", "R15"}


def test_an_oversized_gpu_needs_whole_gpus_and_more_than_24_gpu_hours() -> None:
    assert verdicts(job_stats(shape("oversized_gpu", 8, 4.0)))["R5"] == pytest.approx(32 * 0.88)
    assert "R5" not in verdicts(job_stats(shape("oversized_gpu", 4, 4.0)))  # 16 GPU-h
    assert ambiguous_rules(shape("oversized_gpu", 8, 3.0)) == {"R5"}  # exactly 24 GPU-h
    mig = JobShape(
        SCENARIOS["oversized_gpu"], 8, 4 * 3600, max_nodes=1, fb_total_mib=40192,
        compute_capability=8.0, sm_clock_max_mhz=1410, mig=True,
    )  # fmt: skip
    assert "R5" not in verdicts(job_stats(mig))


def test_a_memory_leak_creeps_and_a_checkpoint_load_is_one_jump() -> None:
    leak = job_stats(shape("memory_leak", 1, 2.0))
    (means,) = leak.fb_windows
    assert means[0] == pytest.approx(0.35 + 0.45 * 0.05)
    assert means[-1] == pytest.approx(0.35 + 0.45 * 0.95)
    assert set(verdicts(leak)) == {"R13"}
    assert leak.fb_max_mib == pytest.approx(0.80 * 81559)
    load = job_stats(shape("checkpoint_load_start", 1, 1.0))
    (means,) = load.fb_windows
    assert means[-1] - means[0] > 0.05 and "R13" not in verdicts(load)
    # 30 minutes is R13's minimum: too close to call
    assert "R13" in ambiguous_rules(shape("memory_leak", 1, 0.5))


def test_step_outliers_are_counted_from_step_20_with_their_excess_over_the_recent_mean() -> None:
    stats = job_stats(shape("step_outliers", 8, 1.0))
    steps = SCENARIOS["step_outliers"].steps
    assert steps is not None
    # 29 normal steps (410 s), two 110-step-time cycles, then 3 more steps: 232 steps, of which
    # 30, 42, 58, 78, 102, 130, 142, 158, 178, 202, 230 are outliers
    assert steps.steps_finished(3600) == 232
    assert [n for n in range(1, 233) if steps.is_outlier(n)] == [
        30, 42, 58, 78, 102, 130, 142, 158, 178, 202, 230,
    ]  # fmt: skip
    assert stats.step_outliers == 11
    # each about 2 step times above the recent mean (a little less with outliers in it)
    s = steps.step_time_s
    assert 11 * 1.8 * s < stats.step_outlier_excess_s < 11 * 2.0 * s
    assert verdicts(stats)["P2"] == pytest.approx(8 * stats.step_outlier_excess_s / 3600)
    assert "P2" not in verdicts(job_stats(shape("step_outliers", 8, 0.5)))  # 5 outliers


def test_a_leaking_job_s_memory_creeps_in_its_samples_as_designed(sim: FleetSimulator) -> None:
    job = next(j for j in sim.fleet.jobs if j.scenario.name == "memory_leak")
    rows = sim.tables(job.start_s, job.end_s, 10)["gpu_samples"]
    rows = rows.filter(pc.equal(rows["job_id"], job.job_id))
    (designed,) = job_stats(sim.fleet.shape(job)).fb_windows
    for uuid in set(rows["gpu_uuid"].to_pylist()):
        mine = rows.filter(pc.equal(rows["gpu_uuid"], uuid))
        used = mine["fb_used_mib"].to_numpy(zero_copy_only=False)
        frac = used / (used + mine["fb_free_mib"].to_numpy(zero_copy_only=False))
        means = [float(np.mean(part)) for part in np.array_split(frac, 10)]
        assert np.allclose(means, designed, atol=0.01)
        assert all(b > a for a, b in itertools.pairwise(means))


def test_a_fragmented_job_holds_half_of_two_hosts_and_is_r15(sim: FleetSimulator) -> None:
    fragmented = [
        j
        for j in sim.fleet.jobs
        if not j.scenario.moves and [len(p.units) for p in j.placements] == [4, 4]
    ]
    assert fragmented
    for job in fragmented:
        assert len({p.host for p in job.placements}) == 2
        assert "R15" in verdicts(job_stats(sim.fleet.shape(job)))
    whole = [j for j in sim.fleet.jobs if [len(p.units) for p in j.placements] == [8, 8]]
    assert whole and all(
        "R15" not in verdicts(job_stats(sim.fleet.shape(j))) for j in whole
    )  # 16 GPUs on 2 nodes: as few as they can be
