"""P4, low MFU, and measured MFU per job: exact figures on crafted step metrics with FLOPs.

A team of four one-rank jobs on H100 (bf16 peak 989.5 TFLOPS) with 1 s steps: three at
395.8 TFLOPs per step (40 % MFU), one at 98.95 TFLOPs per step (10 %). The team's median is 40 %;
10 % is a quarter of it, below the threshold's half: one finding, whose recoverable hours are the
job's training GPU-hours x (1 - 10 / 40).
"""

from __future__ import annotations

import pytest

from analyzers.base import JobInfo, StaticJobCatalog
from analyzers.mfu.measured import job_mfu
from analyzers.rules.p04_low_mfu import LowMfu
from simulator.maker.series import Fleet
from tests.analyzers.rule_runs import DAY, run

PEAK = 989.5e12  # H100 SXM bf16 dense, analyzers.mfu.peaks


def _team(fleet: Fleet, shares: dict[str, float], *, dtype: str = "bf16") -> StaticJobCatalog:
    for host, (job, share) in enumerate(shares.items()):
        fleet.gpus(job, f"h{host}", [0], 0, 60)
        fleet.steps(job, f"h{host}", 0, 0, 600, step_time_s=1.0,
                    flops_per_step=share * PEAK, compute_dtype=dtype)  # fmt: skip
    return StaticJobCatalog(JobInfo(job, team="vision") for job in shares)


def test_measured_mfu_is_flops_per_step_times_steps_per_second_over_the_peak() -> None:
    fleet = Fleet()
    fleet.gpus("ddp", "h1", [0, 1], 0, 60)
    for rank in (0, 1):  # two ranks, 0.5 s steps, 0.2 x peak x 0.5 s FLOPs each: 20 % MFU
        fleet.steps("ddp", "h1", rank, 0, 400, step_time_s=0.5,
                    flops_per_step=0.2 * PEAK * 0.5, compute_dtype="bf16")  # fmt: skip
    fleet.steps("no_flops", "h2", 0, 0, 400)  # an SDK that reported none: no measured MFU
    conn = fleet.connect()
    found = job_mfu(conn, DAY)
    assert list(found) == ["ddp"]
    mfu, row = found["ddp"]
    assert (mfu.kind, mfu.value) == ("measured", pytest.approx(0.2))
    assert (row["ranks"], row["steps"], row["dtype"]) == (2, 800, "bf16")
    assert row["gpu_model"] == "NVIDIA H100 80GB HBM3"
    assert row["steps_per_s"] == pytest.approx(2.0)
    assert row["flops_per_step"] == pytest.approx(2 * 0.2 * PEAK * 0.5)


def test_p4_fires_on_a_job_far_below_its_teams_median_priced_at_the_median() -> None:
    fleet = Fleet()
    catalog = _team(fleet, {"a": 0.40, "b": 0.38, "c": 0.42, "slow": 0.10})
    (finding,) = run(LowMfu(), fleet, catalog)
    assert (finding.rule_id, finding.job_id) == ("P4", "slow")
    assert finding.evidence["mfu_share"] == pytest.approx(0.1)
    assert finding.evidence["team_median_mfu_share"] == pytest.approx(0.39)
    assert finding.evidence["team_jobs"] == 4
    # 600 one-second steps: 600 s of training on one GPU
    assert finding.wasted_gpu_hours == pytest.approx(600 / 3600 * (1 - 0.10 / 0.39))
    assert (
        finding.title
        == "MFU 10.0%, 26% of team vision's median 39.0% on NVIDIA H100 80GB HBM3 (bf16)"
    )


def test_p4_needs_a_group_of_three_on_the_same_model_and_dtype() -> None:
    fleet = Fleet()
    catalog = _team(fleet, {"a": 0.40, "slow": 0.10})  # two jobs: no median to compare with
    for host, job in ((7, "x"), (8, "y")):  # two more, but in fp32: another group
        fleet.gpus(job, f"h{host}", [0], 0, 60)
        fleet.steps(job, f"h{host}", 0, 0, 600, step_time_s=1.0,
                    flops_per_step=0.4 * 67e12, compute_dtype="fp32")  # fmt: skip
        catalog.add(JobInfo(job, team="vision"))
    assert run(LowMfu(), fleet, catalog) == []


def test_p4_partial_and_combine_equal_run() -> None:
    fleet = Fleet()
    catalog = _team(fleet, {"a": 0.40, "b": 0.38, "c": 0.42, "slow": 0.10})
    rule = LowMfu()
    conn = fleet.connect()
    assert rule.combine(rule.partial(conn, DAY), DAY, catalog) == rule.run(conn, DAY, catalog)
