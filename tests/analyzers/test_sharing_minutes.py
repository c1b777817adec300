"""The sharing profile of a long window from the minute roll-up (issue 31): on the simulator's fleet,
stored as segments and rolled up by the warehouse's own step, the roll-up path chooses the same
GPUs, mechanisms and MIG slices as the raw path, with the same allocated hours, means and memory,
and percentiles at or below the raw ones; and it answers with the raw samples gone but for the
window's last minutes (the GPU model, memory size and MIG layout it reads there)."""

from __future__ import annotations

from dataclasses import astuple
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest

from analyzers.run.window import Window
from analyzers.sharing.plan import Plan, SharingThresholds, plan_sharing
from analyzers.sharing.usage import RAW_MAX_H, GpuUse, gpu_uses
from analyzers.sharing.usage_minutes import TAIL_S
from simulator.maker.series import T0
from warehouse.read.reader import open_segments
from warehouse.read.rollups import update_rollups
from warehouse.storage.segments import SegmentStore

DAY = Window(T0, T0 + timedelta(days=1))
STEP_S = 20  # three samples a minute: a minute's mean is not one sample
THRESHOLDS = SharingThresholds(min_hours=3.0)


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from simulator.fleet import FleetSpec
    from simulator.sim import FleetSimulator

    root = tmp_path_factory.mktemp("sharing_minutes") / "segments"
    origin = int(T0.timestamp())
    sim = FleetSimulator(FleetSpec(hosts=12, seed=11), origin_s=origin, horizon_s=86_400)
    store = SegmentStore(root)
    samples = sim.tables(origin, origin + 86_400, STEP_S)["gpu_samples"]
    store.publish(1, {"gpu_samples": store.write("gpu_samples", samples, 1)})
    assert update_rollups(store) == 1
    return root


def _raw_only(root: Path) -> duckdb.DuckDBPyConnection:
    conn = open_segments(root)
    conn.execute("CREATE OR REPLACE VIEW gpu_samples_1m AS SELECT * FROM _empty_gpu_samples_1m")
    return conn


def _uses(conn: duckdb.DuckDBPyConnection, window: Window) -> list[GpuUse]:
    try:
        return gpu_uses(conn, window)
    finally:
        conn.close()


def _same(left: list[GpuUse], right: list[GpuUse]) -> bool:
    """Equal profiles, figures to 1e-9: sums of doubles differ in their last bits with the order
    a parallel scan adds them."""
    return [astuple(u) for u in left] == [
        tuple(pytest.approx(v, rel=1e-9) if isinstance(v, float) else v for v in astuple(u))
        for u in right
    ]


def _decisions(plan: Plan) -> tuple[object, ...]:
    groups = [
        (g.mechanism, g.product, [(m.use.job_id, m.use.host, m.use.gpu, m.mig_profile)
                                  for m in g.members])
        for g in plan.groups
    ]  # fmt: skip
    return plan.candidates, plan.reasons, plan.gpus_freed, groups


def test_a_day_from_minutes_plans_as_a_day_from_raw_samples(segments: Path) -> None:
    rolled = _uses(open_segments(segments), DAY)
    raw = _uses(_raw_only(segments), DAY)
    assert DAY.hours > RAW_MAX_H
    # The roll-up keys by GPU index: a job on a MIG instance is named by it ("1/mig1") only when
    # it still holds it in the window's last minutes, else by its GPU; on MIG either way.
    key = [(u.job_id, u.host, u.gpu.split("/")[0]) for u in rolled]
    assert key == [(u.job_id, u.host, u.gpu.split("/")[0]) for u in raw] and len(key) > 50
    assert sum(u.on_mig for u in raw) > 0
    for r, s in zip(rolled, raw, strict=True):
        assert (r.gpu_model, r.job_gpus, r.on_mig) == (s.gpu_model, s.job_gpus, s.on_mig)
        if not s.on_mig:  # identity and memory size: exact
            assert (r.gpu, r.fb_total_mib) == (s.gpu, s.fb_total_mib)
        assert r.fb_used_max_mib == s.fb_used_max_mib
        # Hours to the minute (a run's ends are known to the minute); means within 0.5 % points
        # of utilization and 0.005 of SM and DRAM activity (the raw path weighs a sample by its
        # seconds, a sample before a dropped one twice; the minutes weigh each sample once).
        assert abs(r.alloc_h - s.alloc_h) <= 1 / 60 + 1e-9
        assert abs(r.util_mean_pct - s.util_mean_pct) <= 0.5
        assert abs(r.sm_mean - s.sm_mean) <= 0.005 and abs(r.dram_mean - s.dram_mean) <= 0.005
        # Percentiles of minute means: never above the samples' (a minute hides its bursts).
        for p95 in ("util_p95_pct", "sm_p95", "dram_p95"):
            assert getattr(r, p95) >= getattr(s, p95) - 1e-9
    rolled_plan = plan_sharing(rolled, DAY.hours, THRESHOLDS)
    raw_plan = plan_sharing(raw, DAY.hours, THRESHOLDS)
    assert _decisions(rolled_plan) == _decisions(raw_plan)
    assert rolled_plan.gpus_freed > 0


def test_a_long_window_never_reads_raw_samples_before_its_last_minutes(segments: Path) -> None:
    """The raw table cut to the window's last `TAIL_S` seconds answers exactly as the whole."""
    whole = _uses(open_segments(segments), DAY)
    conn = open_segments(segments)
    tail = DAY.end - timedelta(seconds=TAIL_S)
    conn.execute(f"""CREATE TABLE tail AS SELECT * FROM gpu_samples
                     WHERE ts >= TIMESTAMPTZ '{tail.isoformat()}'""")
    conn.execute("CREATE OR REPLACE VIEW gpu_samples AS SELECT * FROM tail")
    assert _same(_uses(conn, DAY), whole)


def test_a_window_of_a_few_hours_stays_on_raw_samples(segments: Path) -> None:
    """Up to `RAW_MAX_H` hours the profile is the raw samples' with or without roll-ups."""
    short = Window(DAY.start, DAY.start + timedelta(hours=RAW_MAX_H))
    rolled = _uses(open_segments(segments), short)
    raw = _uses(_raw_only(segments), short)
    assert _same(rolled, raw)
