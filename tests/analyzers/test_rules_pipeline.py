"""P1-P3 from the step metrics training processes report: exact findings on crafted steps."""

from __future__ import annotations

import pytest

from analyzers.rules.p01_dataloader_stall import DataLoaderStall
from analyzers.rules.p02_step_outliers import StepOutliers, periodic
from analyzers.rules.p03_dataloader_workers import DataLoaderWorkers
from simulator.maker.series import Fleet
from tests.analyzers.rule_runs import run


def test_p1_moderate_and_high_input_bound(fleet: Fleet) -> None:
    fleet.gpus("high", "h1", range(2), 0, 60)
    fleet.steps("high", "h1", 0, 0, 500, step_time_s=1.0, data_wait_s=0.3)
    fleet.gpus("moderate", "h2", range(1), 0, 60)
    fleet.steps("moderate", "h2", 0, 0, 500, step_time_s=1.0, data_wait_s=0.1)
    fleet.steps("fine", "h3", 0, 0, 500, step_time_s=1.0, data_wait_s=0.02)
    high, moderate = sorted(run(DataLoaderStall(), fleet), key=lambda f: f.job_id or "")
    assert (high.severity, high.evidence["data_wait_share"]) == ("critical", 0.3)
    # share x training GPU-hours: 490 one-second steps after the 10 skipped, one rank
    assert high.wasted_gpu_hours == pytest.approx(0.3 * 490 / 3600)
    assert (moderate.severity, moderate.gpus) == ("warn", ())
    assert moderate.wasted_gpu_hours == pytest.approx(0.1 * 490 / 3600)


def test_p1_and_p2_charge_no_gpu_hours_to_a_process_without_gpus(fleet: Fleet) -> None:
    """Issue 31: the demo's CPU-only training process was credited recoverable GPU-hours. Its
    findings stay (the stall is real), at 0 GPU-hours; a job with fewer GPUs than ranks on a host
    is charged its GPUs' share (4 ranks on 2 GPUs: half of the rank-hours)."""
    spikes = {37, 81, 113, 160, 171, 229, 260, 301, 355, 390, 444}
    fleet.steps("cpu-only", "h1", 0, 0, 500, step_time_s=lambda i, t: 5.0 if i in spikes else 0.5,
                data_wait_s=0.3)  # fmt: skip
    fleet.gpus("two-gpus", "h2", range(2), 0, 60)
    for rank in range(4):
        fleet.steps("two-gpus", "h2", rank, 0, 500, step_time_s=1.0, data_wait_s=0.3)
    cpu, shared = sorted(run(DataLoaderStall(), fleet), key=lambda f: f.job_id or "")
    assert (cpu.job_id, cpu.wasted_gpu_hours, cpu.evidence["gpus"]) == ("cpu-only", 0.0, 0)
    assert cpu.evidence["training_rank_hours"] > 0 and "CPU-only" in cpu.estimate_method
    assert shared.evidence["gpus"] == 2
    assert shared.wasted_gpu_hours == pytest.approx(0.3 * 4 * 490 / 3600 / 2)
    (outliers,) = run(StepOutliers(), fleet)
    assert (outliers.job_id, outliers.evidence["outliers"]) == ("cpu-only", 11)
    assert outliers.wasted_gpu_hours == 0.0


def test_p2_random_outliers_fire_periodic_evaluation_does_not(fleet: Fleet) -> None:
    spikes = {37, 81, 113, 160, 171, 229, 260, 301, 355, 390, 444}
    fleet.gpus("spiky", "h1", range(1), 0, 60)
    fleet.steps("spiky", "h1", 0, 0, 500, step_time_s=lambda i, t: 5.0 if i in spikes else 0.5)
    fleet.steps("evals", "h2", 0, 0, 500, step_time_s=lambda i, t: 5.0 if i % 40 == 39 else 0.5)
    (f,) = run(StepOutliers(), fleet)
    assert (f.job_id, f.evidence["outliers"]) == ("spiky", 11)
    # excess over the recent mean, which an earlier spike in the last 50 steps raises a little
    assert f.wasted_gpu_hours == pytest.approx(11 * 4.5 / 3600, rel=0.02)
    assert periodic([39, 79, 119, 159], 0.1) and not periodic([37, 81, 113, 160], 0.1)


def test_p3_too_few_and_too_many_workers_for_the_cores(fleet: Fleet) -> None:
    fleet.steps("few", "h1", 0, 0, 200, data_wait_s=0.1, dataloader_workers=2)
    fleet.host("h1", 0, 10, cpu_cores=32.0)
    fleet.steps("few_fine", "h2", 0, 0, 200, data_wait_s=0.0, dataloader_workers=2)
    fleet.host("h2", 0, 10, cpu_cores=32.0)
    fleet.steps("many", "h3", 0, 0, 200, dataloader_workers=40)
    fleet.steps("many", "h3", 1, 0, 200, dataloader_workers=40)
    fleet.host("h3", 0, 10, cpu_cores=32.0)
    few, few_fine, many = sorted(run(DataLoaderWorkers(), fleet), key=lambda f: f.job_id or "")
    assert (few.job_id, few.evidence["workers_per_core"]) == ("few", 0.0625)
    assert (few.evidence["data_wait_share"], few_fine.evidence["data_wait_share"]) == (0.2, 0.0)
    assert (many.job_id, many.evidence["workers"], many.evidence["ranks_on_host"]) == (
        "many",
        80.0,
        2,
    )
    assert few.wasted_gpu_hours == many.wasted_gpu_hours == 0.0


def test_p3_a_job_on_part_of_a_host_is_judged_against_its_gpus_share_of_the_cores(
    fleet: Fleet,
) -> None:
    """No cgroup row for the jobs: a one-GPU job on an eight-GPU, 96-core host has 12 cores (12
    workers are right for it, not 12 % of the host); a two-GPU job with 2 workers has too few."""
    fleet.host("h1", 0, 10, cpu_cores=96.0)
    fleet.gpus(None, "h1", range(3, 8), 0, 10)
    fleet.gpus("one_gpu", "h1", [0], 0, 10)
    fleet.steps("one_gpu", "h1", 0, 0, 200, dataloader_workers=12)
    fleet.gpus("two_gpus", "h1", [1, 2], 0, 10)
    fleet.steps("two_gpus", "h1", 0, 0, 200, dataloader_workers=2)
    (few,) = run(DataLoaderWorkers(), fleet)
    assert few.job_id == "two_gpus"
    assert few.title == "2 DataLoader workers for 24 CPU cores (8%)"
    assert {k: few.evidence[k] for k in ("cpu_cores", "host_cpu_cores", "job_gpus_on_host")} == {
        "cpu_cores": 24.0,
        "host_cpu_cores": 96.0,
        "job_gpus_on_host": 2,
    }
    assert few.evidence["host_gpus"] == 8
