"""Batch generation yields what an agent would have made of the live pages, value for value."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from fleetscope.attribution.labels import k8s_job_id
from fleetscope.contract import GPU_SAMPLES, HOST_SAMPLES, STEP_SAMPLES, conform
from fleetscope.dcgm_fields import FIELDS
from simulator.fleet import FleetSpec
from simulator.signals import exact_f
from simulator.sim import FleetSimulator

from .conftest import T0


def page_rows(
    sim: FleetSimulator, host_index: int, t: int
) -> dict[tuple[int, int | None], dict[str, Any]]:
    """Parse a served page with prometheus_client: (gpu, GPU_I_ID) -> column -> value, labels."""
    rows: dict[tuple[int, int | None], dict[str, Any]] = {}
    page = sim.page(sim.hosts[host_index], t)
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            labels = sample.labels
            mig = labels.get("GPU_I_ID")
            row = rows.setdefault((int(labels["gpu"]), int(mig) if mig else None), {})
            row["labels"] = labels
            spec = FIELDS.get(family.name)  # counters' samples get a _total suffix here
            key = spec.column if spec else family.name
            row[key] = sample.value
    return rows


def test_batch_rows_equal_the_parsed_live_pages_at_the_same_second(sim: FleetSimulator) -> None:
    t0, t1 = T0 + 3 * 3600, T0 + 3 * 3600 + 300
    table = sim.tables(t0, t1, 60)["gpu_samples"]
    assert table.schema == GPU_SAMPLES
    checked = 0
    for t in range(t0, t1, 60):
        for host in sim.hosts:
            batch = table.filter(
                pc.and_(
                    pc.equal(table["host"], host.name),
                    pc.equal(pc.cast(table["ts"], pa.int64()), t * 1000),
                )
            ).to_pylist()
            if sim.scrape_fails(host, t):
                assert batch == []
                continue
            page = page_rows(sim, host.index, t)
            assert len(batch) == len(page)
            for row in batch:
                parsed = page[(row["gpu_index"], row["mig_instance_id"])]
                labels = parsed.pop("labels")
                energy = parsed.pop("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
                assert dict(row["extra"]) == {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": energy}
                for column, value in parsed.items():
                    assert row[column] == value, (host.name, column)
                if row["mig_instance_id"] is not None:
                    assert "gpu_util" not in parsed
                    assert row["gpu_util"] == parsed["gr_engine_active"] * 100.0
                assert row["gpu_uuid"] == labels["UUID"]
                if "hpc_job" in labels:
                    assert row["job_id"] == labels["hpc_job"]
                    assert row["attribution"] == "hpc_job"
                elif labels.get("pod"):
                    assert row["job_id"] == k8s_job_id(labels["namespace"], labels["pod"])
                    assert row["attribution"] == "k8s"
                else:
                    assert row["job_id"] is None and row["attribution"] is None
                checked += 1
    assert checked > 100


def test_tables_follow_the_contract_and_conform(sim: FleetSimulator) -> None:
    tables = sim.tables(T0, T0 + 1800, 10)
    for name, schema in (
        ("gpu_samples", GPU_SAMPLES),
        ("host_samples", HOST_SAMPLES),
        ("step_samples", STEP_SAMPLES),
    ):
        assert tables[name].schema == schema
        assert conform(name, tables[name]).num_rows == tables[name].num_rows > 0


def test_missing_scrapes_drop_exactly_those_rows(sim: FleetSimulator) -> None:
    t0, t1 = T0, T0 + 6 * 3600
    gpu = sim.tables(t0, t1, 10)["gpu_samples"]
    expected = 0
    for host in sim.hosts:
        units = sum(1 for u in sim.fleet.units if u.host == host.index)
        ok = sum(not sim.scrape_fails(host, t) for t in range(t0, t1, 10))
        expected += ok * units
    assert gpu.num_rows == expected
    flaky = sim.hosts[2]
    failures = sum(sim.scrape_fails(flaky, t) for t in range(t0, t1, 10))
    assert 0.02 < failures / ((t1 - t0) / 10) < 0.09  # the flaky host: 5 %


def test_host_rows_have_a_whole_host_row_and_one_per_job(sim: FleetSimulator) -> None:
    t = T0 + 7200
    hosts = sim.tables(t, t + 1, 1)["host_samples"].to_pylist()
    assert sum(r["job_id"] is None for r in hosts) == len(sim.hosts)
    held = {
        (sim.hosts[p.host].name, j.job_id)
        for j in sim.fleet.jobs
        for p in j.placements
        if p.start_s <= t < p.end_s
    }
    assert {(r["host"], r["job_id"]) for r in hosts if r["job_id"]} == held
    for row in hosts:
        assert 0 <= row["cpu_user_pct"] <= 100


def test_step_rows_carry_the_designed_data_wait_share(sim: FleetSimulator) -> None:
    steps = sim.tables(T0, T0 + 86_400, 30)["step_samples"]
    share = pc.divide(steps["data_wait_s"], steps["step_time_s"]).to_numpy()
    by_job = {j.job_id: j for j in sim.fleet.jobs}
    jobs = steps["job_id"].to_pylist()
    profiles = [by_job[j].scenario.steps for j in jobs]
    # an outlier step (a slow all-reduce) takes longer; its data wait does not
    designed = np.array(
        [
            (p.data_wait_share / (p.outlier_factor if p.is_outlier(step) else 1.0)) if p else np.nan
            for p, step in zip(profiles, steps["step"].to_pylist(), strict=True)
        ]
    )
    assert np.all(np.abs(share - designed) <= designed * 0.051 + 1e-9)
    assert {by_job[j].scenario.name for j in jobs} >= {"healthy", "step_outliers"}


def test_outlier_steps_are_each_reported_once_and_delay_the_steps_after_them() -> None:
    """A 14 s step on a 10 s grid: every step finished is one row, outliers 3x as long, and the
    step count at any second is what StepProfile.steps_finished says (outliers included)."""
    sim = FleetSimulator(FleetSpec(hosts=6, seed=11), origin_s=T0, horizon_s=2 * 86_400)
    job = next(j for j in sim.fleet.jobs if j.scenario.name == "step_outliers")
    profile = job.scenario.steps
    assert profile is not None
    steps = sim.tables(job.start_s, job.end_s, 10)["step_samples"]
    rows = steps.filter(pc.equal(steps["job_id"], job.job_id))
    for rank in range(job.n_gpus):
        mine = rows.filter(pc.equal(rows["rank"], rank))
        numbers = mine["step"].to_pylist()
        assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))  # none skipped
        times = mine["step_time_s"].to_numpy()
        slow = np.array([profile.is_outlier(n) for n in numbers])
        assert slow.sum() >= 10
        assert np.all(np.abs(times[slow] / profile.step_time_s - 3.0) <= 0.151)
        assert np.all(np.abs(times[~slow] / profile.step_time_s - 1.0) <= 0.051)
    last = rows["step"].to_pylist()[-1]
    seconds = job.end_s - job.start_s
    assert last in {profile.steps_finished(seconds - dt) for dt in range(0, 11)}


@given(st.floats(min_value=0.0, max_value=1e12, allow_nan=False))
def test_exact_f_values_survive_percent_f_printing(value: float) -> None:
    snapped = float(exact_f(np.array([value]))[0])
    assert float(f"{snapped:f}") == snapped
    assert math.isclose(snapped, value, abs_tol=1e-6)


def test_io_wait_is_on_the_whole_host_rows_only_and_follows_an_io_bound_job() -> None:
    """cgroups have no I/O wait (the agent leaves it null on job rows); a host filled by an
    I/O-bound job waits on I/O in the job's starved blocks, 70 % of its samples."""
    sim = FleetSimulator(FleetSpec(hosts=6, seed=25), origin_s=T0, horizon_s=86_400)
    job = next(j for j in sim.fleet.jobs if j.scenario.name == "io_bottleneck")
    host = sim.hosts[job.placements[0].host].name
    rows = sim.tables(job.start_s, job.end_s, 10)["host_samples"]
    assert rows.filter(pc.is_valid(rows["job_id"]))["cpu_iowait_pct"].null_count == len(
        rows.filter(pc.is_valid(rows["job_id"]))
    )
    whole = rows.filter(pc.and_(pc.is_null(rows["job_id"]), pc.equal(rows["host"], host)))
    iowait = whole["cpu_iowait_pct"].to_numpy(zero_copy_only=False)
    assert set(np.round(iowait, 1)) == {0.4, 72.0}
    assert np.mean(iowait > 50) == pytest.approx(0.7, abs=0.05)
    others = rows.filter(pc.and_(pc.is_null(rows["job_id"]), pc.not_equal(rows["host"], host)))
    assert set(others["cpu_iowait_pct"].to_pylist()) == {0.4}
