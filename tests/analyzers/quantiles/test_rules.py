"""R11, R12 and P2 read their percentiles from the window's sketches: the same findings as exact
percentiles on crafted data, evidence within the sketch's 1 % value error."""

from __future__ import annotations

import numpy as np
import pytest

from analyzers.rules.p02_step_outliers import StepOutliers
from analyzers.rules.r11_util_profile import UtilProfile
from simulator.maker.series import Fleet
from tests.analyzers.rule_runs import run


def noisy(mean: float) -> object:
    return lambda i, t: mean + 7.3 * np.sin(i * 0.37) + (i % 11) * 0.61


def test_r11_r12_findings_match_exact_percentiles(fleet: Fleet) -> None:
    for job, host, mean in (("low", "h1", 40.0), ("mid", "h2", 55.0), ("high", "h3", 88.0)):
        fleet.gpus(job, host, range(2), 0, 90, gpu_util=noisy(mean), fb_used_mib=noisy(30000.0))
        fleet.host(host, 0, 90, cpu_user_pct=noisy(30.0))
    found = {(f.rule_id, f.job_id, f.scope): f for f in run(UtilProfile(), fleet)}
    assert set(found) == {
        ("R11", "low", "under-utilized"),
        ("R12", "low", ""),
        ("R11", "mid", "under-utilized"),
        ("R12", "mid", ""),
    }
    for job in ("low", "mid"):
        rows = [r for r in fleet.gpu_rows if r["job_id"] == job]
        util = np.array([r["gpu_util"] for r in rows])
        evidence = found["R11", job, "under-utilized"].evidence
        for key, q in (("util_p95_pct", 0.95), ("util_p05_pct", 0.05)):
            exact = float(np.quantile(util, q, method="inverted_cdf"))
            assert evidence[key] == pytest.approx(exact, rel=0.01)
        cpu = np.array([r["cpu_user_pct"] + r["cpu_system_pct"] for r in fleet.host_rows])
        exact_cpu = float(np.quantile(cpu, 0.95, method="inverted_cdf"))
        assert found["R12", job, ""].evidence["cpu_p95_pct"] == pytest.approx(exact_cpu, rel=0.01)


def test_p2_screens_steady_jobs_and_reports_the_step_tail(fleet: Fleet) -> None:
    spikes = {37, 81, 113, 160, 171, 229, 260, 301, 355, 390, 444}
    fleet.steps("spiky", "h1", 0, 0, 500, step_time_s=lambda i, t: 5.0 if i in spikes else 0.5)
    # steady within 10 %: no step can be 10 % above a mean of its neighbours, screened out
    fleet.steps("steady", "h2", 0, 0, 500, step_time_s=lambda i, t: 0.5 + (i % 7) * 0.007)
    (f,) = run(StepOutliers(), fleet)
    assert (f.job_id, f.evidence["outliers"]) == ("spiky", 11)
    assert (f.evidence["step_p50_s"], f.evidence["step_p99_s"]) == (0.5, 5.0)
