"""R13-R17: memory creep, stragglers, fragmentation (and a job that moves hosts), throttling,
hardware faults; exact findings on crafted data."""

from __future__ import annotations

import pytest

from analyzers.rules.r13_memory_creep import MemoryCreep
from analyzers.rules.r14_stragglers import Stragglers
from analyzers.rules.r15_fragmentation import Fragmentation
from analyzers.rules.r16_throttling import Throttling
from analyzers.rules.r17_hardware import HardwareFaults
from simulator.maker.series import Fleet
from tests.analyzers.rule_runs import run


def test_r13_steady_growth_fires_a_flat_job_does_not(fleet: Fleet) -> None:
    fleet.gpus("leak", "h1", range(1), 0, 120, fb_used_mib=lambda i, t: 20000.0 + 3 * t)
    fleet.gpus("flat", "h2", range(1), 0, 120)
    (f,) = run(MemoryCreep(), fleet)
    assert (f.rule_id, f.job_id, f.gpus, f.wasted_gpu_hours) == ("R13", "leak", ("0",), 0.0)
    assert f.evidence["growth_mib_per_h"] == pytest.approx(10800, rel=0.02)


def test_r14_one_slow_gpu_among_eight(fleet: Fleet) -> None:
    fleet.gpus("strag", "h1", range(7), 0, 60, gpu_util=95.0)
    fleet.gpus("strag", "h1", [7], 0, 60, gpu_util=55.0)
    fleet.gpus("even", "h2", range(8), 0, 60, gpu_util=lambda i, t: 90.0 + (i % 3))
    (f,) = run(Stragglers(), fleet)
    assert (f.job_id, f.host, f.gpus) == ("strag", "h1", ("7",))
    assert f.evidence["max_histogram_distance"] == 1.0
    assert f.wasted_gpu_hours == pytest.approx(1 * (95 - 55) / 95)


def test_r15_spread_job_fires_a_moving_job_does_not(fleet: Fleet) -> None:
    for host in ("h1", "h2", "h3", "h4"):
        fleet.gpus("spread", host, range(2), 0, 60)  # 8 GPUs over 4 nodes
    fleet.gpus("moved", "h5", range(4), 0, 30)
    fleet.gpus("moved", "h6", range(4), 31, 30)  # restarted elsewhere: never on two at once
    fleet.gpus("big", "h7", range(8), 0, 60).gpus("big", "h8", range(8), 0, 60)
    (f,) = run(Fragmentation(), fleet)
    assert (f.job_id, f.evidence["nodes_needed"], f.evidence["hosts"]) == (
        "spread",
        1,
        ["h1", "h2", "h3", "h4"],
    )


def test_r16_thermal_counter_rising_while_busy(fleet: Fleet) -> None:
    # throttled 2 s of every 10 s sample (20 %), clock drops from 1980 to 1500 MHz meanwhile
    fleet.gpus(
        "hot",
        "h1",
        range(1),
        0,
        60,
        thermal_violation_us=lambda i, t: i * 2e6,
        sm_clock_mhz=lambda i, t: 1500.0 if i else 1980.0,
    )
    fleet.gpus("cool", "h2", range(1), 0, 60, thermal_violation_us=5e6)
    (f,) = run(Throttling(), fleet)
    assert (f.job_id, f.host) == ("hot", "h1")
    assert f.evidence["throttled_share"] == pytest.approx(0.2, abs=0.01)
    assert "thermal" in f.title


def test_r17_new_xid_dbe_and_idle_hours_after_the_fault(fleet: Fleet) -> None:
    fleet.gpus(
        "victim",
        "h1",
        range(1),
        0,
        60,
        xid_last=lambda i, t: 79.0 if t >= 1800 else 0.0,
        gpu_util=lambda i, t: 0.0 if t >= 1800 else 95.0,
    )
    fleet.gpus(None, "h2", range(1), 0, 60, ecc_dbe_total=lambda i, t: 0.0 if t < 600 else 2.0)
    fleet.gpus("app_bug", "h3", range(1), 0, 60, xid_last=lambda i, t: 13.0 if t >= 600 else 0.0)
    found = {f.host: f for f in run(HardwareFaults(), fleet)}
    assert set(found) == {"h1", "h2", "h3"}
    assert (found["h1"].severity, found["h1"].evidence["xids"]) == ("critical", [79])
    assert found["h1"].wasted_gpu_hours == pytest.approx(0.5, abs=0.01)
    assert (found["h2"].job_id, found["h2"].evidence["ecc_dbe"]) == (None, 2.0)
    assert (found["h3"].severity, found["h3"].evidence["xids"]) == ("warn", [13])


def test_r17_a_fractional_xid_is_not_an_xid_code(fleet: Fleet) -> None:
    """XID codes are integers (DCGM_FI_DEV_XID_ERRORS); a fraction is a malformed sample, not XID 0."""
    fleet.gpus("odd", "h1", range(1), 0, 60, xid_last=lambda i, t: 0.4 if t >= 600 else 0.0)
    fleet.gpus("real", "h2", range(1), 0, 60, xid_last=lambda i, t: 43.0 if t >= 600 else 0.0)
    found = {f.host: f for f in run(HardwareFaults(), fleet)}
    assert set(found) == {"h2"}
    assert found["h2"].evidence["xids"] == [43]
