"""R1-R5, R11, R12: utilization rules on crafted warehouse data, exact findings expected."""

from __future__ import annotations

import pytest

from analyzers.base import JobInfo, StaticJobCatalog
from analyzers.findings import Severity
from analyzers.rules.r01_zero_util import ZeroUtilization
from analyzers.rules.r02_low_util import LowUtilization
from analyzers.rules.r03_idle_live import IdleAllocation
from analyzers.rules.r04_user_efficiency import UserEfficiency
from analyzers.rules.r05_oversized_gpu import OversizedGpu
from analyzers.rules.r11_util_profile import UtilProfile
from simulator.maker.series import T0, Fleet
from tests.analyzers.rule_runs import run

IDLE = {"gpu_util": 0.0, "gr_engine_active": 0.0, "sm_active": 0.0, "tensor_active": 0.0}


def test_r1_flags_only_the_gpus_at_zero_with_all_their_hours(fleet: Fleet) -> None:
    fleet.gpus("j1", "h1", range(2), 0, 60).gpus("j1", "h1", range(2, 4), 0, 60, **IDLE)
    fleet.gpus("short", "h2", range(1), 0, 5, **IDLE)  # 300 s exactly: jobstats needs more
    (f,) = run(ZeroUtilization(), fleet)
    assert (f.rule_id, f.job_id, f.host, f.gpus) == ("R1", "j1", "h1", ("2", "3"))
    assert f.severity is Severity.CRITICAL
    assert f.wasted_gpu_hours == 2.0
    assert f.evidence["samples_n"] == 720
    assert f.window_start == T0 and f.bucket_start == T0


def test_r2_red_and_warn_lines_and_the_target_estimate(fleet: Fleet) -> None:
    fleet.gpus("red", "h1", range(1), 0, 70, gpu_util=10.0)
    fleet.gpus("warn", "h2", range(1), 0, 70, gpu_util=20.0)
    fleet.gpus("ok", "h3", range(1), 0, 70, gpu_util=25.0)
    fleet.gpus("zero", "h4", range(1), 0, 70, **IDLE)  # R1's, not R2's
    red, warn = run(LowUtilization(), fleet)
    assert (red.job_id, red.severity, red.evidence["util_mean_pct"]) == ("red", "critical", 10.0)
    assert (warn.job_id, warn.severity) == ("warn", Severity.WARN)
    # 70 min allocated: 7/6 GPU-h x (1 - util/100)
    assert red.wasted_gpu_hours == pytest.approx(7 / 6 * 0.9)
    assert warn.wasted_gpu_hours == pytest.approx(7 / 6 * 0.8)


def test_r2_does_not_judge_the_checkpoint_load_at_start(fleet: Fleet) -> None:
    # 8 idle minutes (checkpoint load) then busy: the grace period keeps R2 silent.
    util = lambda i, t: 0.0 if t < 480 else 60.0  # noqa: E731
    fleet.gpus("load", "h1", range(1), 0, 30, gpu_util=util)
    assert run(LowUtilization(), fleet) == []
    assert run(IdleAllocation(), fleet) == []
    assert run(ZeroUtilization(), fleet) == []


def test_r3_warns_at_60_and_recommends_cancel_at_120_minutes(fleet: Fleet) -> None:
    busy_then_idle = lambda i, t: 90.0 if t < 1800 else 0.0  # noqa: E731
    fleet.gpus("warn", "h1", range(1), 0, 30 + 70, gpu_util=busy_then_idle)
    fleet.gpus("cancel", "h2", range(2), 0, 130, **IDLE)
    fleet.gpus("short", "h3", range(1), 0, 50, **IDLE)
    cancel, warn = sorted(run(IdleAllocation(), fleet), key=lambda f: f.job_id or "")
    assert (cancel.job_id, cancel.gpus, cancel.severity) == ("cancel", ("0", "1"), "critical")
    assert cancel.wasted_gpu_hours == pytest.approx(2 * 130 / 60)
    assert cancel.evidence["longest_idle_min"] == 130.0
    assert cancel.evidence["ongoing"] is True
    assert (warn.job_id, warn.severity) == ("warn", "warn")
    assert warn.wasted_gpu_hours == pytest.approx(70 / 60)


def test_r4_reports_users_below_25_percent_with_over_50_gpu_hours(fleet: Fleet) -> None:
    fleet.gpus("a1", "h1", range(8), 0, 420, gpu_util=10.0)  # 56 GPU-h at 10 %
    fleet.gpus("b1", "h2", range(8), 0, 420, gpu_util=60.0)
    fleet.gpus("c1", "h3", range(1), 0, 420, gpu_util=5.0)  # 7 GPU-h: too few
    catalog = StaticJobCatalog(
        [JobInfo("a1", "alice", "vision"), JobInfo("b1", "bob", "nlp"), JobInfo("c1", "carol")]
    )
    (f,) = run(UserEfficiency(), fleet, catalog)
    assert (f.rule_id, f.user, f.team, f.job_id, f.scope) == (
        "R4",
        "alice",
        None,
        None,
        "user:alice",
    )
    assert f.wasted_gpu_hours == 0.0
    assert f.evidence["efficiency_pct"] == 10.0 and f.evidence["jobs"] == ["a1"]
    assert f.evidence["recoverable_at_target_gpu_hours"] == pytest.approx(56 * 0.8)


def test_r5_suggests_the_smallest_mig_slice_that_fits(fleet: Fleet) -> None:
    small = {"gpu_util": 12.0, "fb_used_mib": 4000.0, "fb_free_mib": 77920.0}
    fleet.gpus("small", "h1", range(1), -120, 25 * 60, interval_s=60, **small)
    fleet.gpus("short", "h2", range(1), 0, 10 * 60, interval_s=60, **small)
    fleet.gpus("mig", "h3", range(1), 0, 25 * 60, interval_s=60, mig_profile="1g.10gb", **small)
    (f,) = run(OversizedGpu(), fleet)
    assert (f.job_id, f.evidence["mig_slice_sevenths"]) == ("small", 1)
    # the job started 2 h before the day: its bucket holds 23 of its 25 hours, the look-back all
    assert f.evidence["job_gpu_hours_lookback"] == pytest.approx(25.0, abs=0.02)
    assert f.wasted_gpu_hours == pytest.approx(23 * (1 - 0.12))


def test_r11_under_utilized_r12_small_batch_and_fluctuating(fleet: Fleet) -> None:
    # under-utilized: memory full, so a bigger batch will not fit
    fleet.gpus(
        "under", "h1", range(1), 0, 60, gpu_util=50.0, fb_used_mib=75000.0, fb_free_mib=6559.0
    )
    fleet.host("h1", 0, 60, job="under", cpu_user_pct=20.0)
    # small batch: GPU, CPU and memory all below 70 %
    fleet.gpus(
        "small", "h2", range(1), 0, 60, gpu_util=40.0, fb_used_mib=20000.0, fb_free_mib=61559.0
    )
    fleet.host("h2", 0, 60, cpu_user_pct=20.0)
    # fluctuating: 90 % with every fifth sample at 0 %
    fleet.gpus("fluct", "h3", range(1), 0, 60, gpu_util=lambda i, t: 0.0 if i % 5 == 0 else 90.0)
    fleet.gpus("healthy", "h4", range(1), 0, 60)
    found = {(f.rule_id, f.job_id, f.scope): f for f in run(UtilProfile(), fleet)}
    assert set(found) == {
        ("R11", "under", "under-utilized"),
        ("R12", "small", ""),
        ("R11", "small", "under-utilized"),  # independent rules, as in SageMaker Debugger
        ("R11", "fluct", "fluctuating"),
    }
    assert found["R11", "under", "under-utilized"].wasted_gpu_hours == pytest.approx(0.5)
    assert found["R12", "small", ""].evidence["cpu_p95_pct"] == 25.0
    assert found["R12", "small", ""].wasted_gpu_hours == pytest.approx(0.6)
    assert found["R11", "fluct", "fluctuating"].wasted_gpu_hours == pytest.approx(1 - 72 / 100)


def test_r12_stays_silent_without_host_samples(fleet: Fleet) -> None:
    fleet.gpus(
        "small", "h2", range(1), 0, 60, gpu_util=40.0, fb_used_mib=20000.0, fb_free_mib=61559.0
    )
    (f,) = run(UtilProfile(), fleet)
    assert (f.rule_id, f.scope) == ("R11", "under-utilized")
