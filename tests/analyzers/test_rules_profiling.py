"""R6-R8 (DCGM profiling fields), R9/R10 (host bottlenecks): exact findings, and silence when the
profiling fields are disabled (dcgm-exporter's default CSV) instead of a misfire."""

from __future__ import annotations

import pytest

from analyzers.rules.r06_sm_activity import SmActivity, compute_capability
from analyzers.rules.r09_host_bottleneck import HostBottleneck
from simulator.maker.series import Fleet
from tests.analyzers.rule_runs import run


def test_r6_low_sm_r7_no_tensor_r8_memory_bound(fleet: Fleet) -> None:
    fleet.gpus("lowsm", "h1", range(2), 0, 60, sm_active=0.3)
    fleet.gpus("fp32", "h2", range(1), 0, 60, sm_active=0.85, tensor_active=0.0)
    fleet.gpus("membound", "h3", range(1), 0, 60, sm_active=0.3, dram_active=0.9)
    fleet.gpus("healthy", "h4", range(1), 0, 60)
    fleet.gpus("idle", "h5", range(1), 0, 60, gpu_util=5.0, sm_active=0.02)  # R2's business
    found = {(f.rule_id, f.job_id): f for f in run(SmActivity(), fleet)}
    assert set(found) == {
        ("R6", "lowsm"),
        ("R7", "fp32"),
        ("R6", "membound"),
        ("R8", "membound"),  # the more specific diagnosis; the ranking counts the job once
        ("R6", "idle"),  # a job that works a little still runs its SMs badly
    }
    assert found["R6", "lowsm"].gpus == ("0", "1")
    assert found["R6", "lowsm"].wasted_gpu_hours == pytest.approx(2 * (0.8 - 0.3) / 0.8)
    assert found["R7", "fp32"].evidence["compute_capability"] == 9.0
    assert found["R7", "fp32"].wasted_gpu_hours == pytest.approx(0.5)
    r8 = found["R8", "membound"]
    assert (r8.evidence["dram_active_mean"], r8.evidence["sm_active_mean"]) == (0.9, 0.3)


def test_profiling_rules_degrade_when_fields_are_disabled(fleet: Fleet) -> None:
    off = {"sm_active": None, "tensor_active": None, "dram_active": None, "sm_occupancy": None}
    fleet.gpus("noprof", "h1", range(1), 0, 60, **off)
    assert run(SmActivity(), fleet) == []


def test_r7_needs_tensor_cores_on_the_part(fleet: Fleet) -> None:
    fleet.gpus("p100", "h1", range(1), 0, 60, gpu_model="Tesla P100-PCIE-16GB", tensor_active=0.0)
    fleet.gpus("unknown", "h2", range(1), 0, 60, gpu_model="Mystery GPU", tensor_active=0.0)
    assert run(SmActivity(), fleet) == []
    assert compute_capability("NVIDIA A100-SXM4-80GB") == 8.0
    assert compute_capability("Tesla V100-SXM2-32GB") == 7.0


def test_mig_slices_use_gr_engine_active_when_gpu_util_is_absent(fleet: Fleet) -> None:
    fleet.gpus(
        "mig",
        "h1",
        range(1),
        0,
        60,
        mig_profile="3g.40gb",
        gpu_util=None,
        gr_engine_active=0.9,
        sm_active=0.2,
    )
    (f,) = run(SmActivity(), fleet)
    assert (f.rule_id, f.evidence["util_mean_pct"]) == ("R6", 90.0)


def test_r9_cpu_and_r10_io_bottlenecks(fleet: Fleet) -> None:
    starved = lambda i, t: 5.0 if i % 4 else 90.0  # noqa: E731  (75 % of samples below 10 %)
    fleet.gpus("cpu", "h1", range(1), 0, 60, gpu_util=starved)
    fleet.host("h1", 0, 60, job="cpu", cpu_user_pct=85.0, cpu_system_pct=10.0)
    fleet.host("h1", 0, 60, cpu_user_pct=10.0)  # the host-wide row loses to the job's cgroup
    fleet.gpus("io", "h2", range(1), 0, 60, gpu_util=starved)
    fleet.host("h2", 0, 60, cpu_iowait_pct=70.0)
    fleet.gpus("busy_host_busy_gpu", "h3", range(1), 0, 60)
    fleet.host("h3", 0, 60, cpu_user_pct=99.0)
    r9, r10 = sorted(run(HostBottleneck(), fleet), key=lambda f: f.job_id or "")
    assert (r9.rule_id, r9.job_id) == ("R9", "cpu")
    assert (r10.rule_id, r10.job_id) == ("R10", "io")
    assert r9.evidence["bottleneck_sample_share"] == pytest.approx(0.75, abs=0.01)
    assert r9.wasted_gpu_hours == pytest.approx(0.75, abs=0.01)
