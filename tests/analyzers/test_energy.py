"""Energy per job (analyzers.accounting.energy) on recorded dcgm-exporter pages: each scrape is the
recorded page with its energy counter advanced as the GPU's own power reading says, normalized by
the collector's code into a real DuckDB warehouse. Counter deltas, a counter reset (driver
reload), a missing counter (power integration), MIG instances sharing their device's counter and
idle-allocated energy, each to the joule."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from analyzers.accounting.energy import ENERGY_FIELD, J_PER_KWH, energy_source, job_energy
from analyzers.run.window import Window
from fleetscope.exposition import parse
from fleetscope.normalize import normalize_samples
from simulator.maker.tables import rows_table

DATA = Path(__file__).parents[1] / "data" / "dcgm"
T0 = datetime(2026, 11, 23, tzinfo=UTC)
STEP_S = 30
JOBS = {0: "a", 1: "a", 2: "a", 3: "a", 4: "b", 5: "b", 6: "b"}  # GPU 7: not allocated


def values(text: str, metric: str) -> dict[tuple[int, str], float]:
    """(gpu, GPU_I_ID) -> the page's value of `metric`."""
    out = {}
    for s in parse(text).samples:
        if s.name == metric:
            out[(int(s.labels["gpu"]), s.labels.get("GPU_I_ID", ""))] = float(s.value)
    return out


def rewrite(text: str, metric: str, new: dict[int, float]) -> str:
    """The page with `metric`'s value replaced on every line of the GPUs in `new`."""

    def one(match: re.Match[str]) -> str:
        gpu = int(re.search(r'\bgpu="(\d+)"', match.group(1)).group(1))  # type: ignore[union-attr]
        return f"{match.group(1)} {new[gpu]:.0f}" if gpu in new else match.group(0)

    return re.sub(rf"^({metric}\{{[^}}]*\}}) \S+$", one, text, flags=re.M)


def warehouse(pages: list[str]) -> duckdb.DuckDBPyConnection:
    """Scrape k of `pages` taken at T0 + k x 30 s, through the collector's normalization."""
    rows = []
    for k, text in enumerate(pages):
        ts = T0 + timedelta(seconds=k * STEP_S)
        for reading in normalize_samples(
            parse(text).samples, ts_ms=int(ts.timestamp() * 1000), cluster="c1"
        ):
            row = {**reading.row, "ts": ts, "extra": reading.extra or None}
            row["job_id"] = JOBS.get(row["gpu_index"])
            rows.append(row)
    con = duckdb.connect()
    con.register("_rows", rows_table("gpu_samples", rows))
    con.execute("CREATE TABLE gpu_samples AS SELECT * FROM _rows")
    return con


def per_job(con: duckdb.DuckDBPyConnection) -> dict[str | None, dict[str, float]]:
    window = Window(T0, T0 + timedelta(minutes=10), bucket_s=600)
    frame = job_energy(con, window, default_interval_s=float(STEP_S))
    return {
        (None if pd.isna(row.job_id) else str(row.job_id)): {
            "joules": row.energy_kwh * J_PER_KWH,
            "idle_joules": row.idle_energy_kwh * J_PER_KWH,
            "source": energy_source(row),
        }  # type: ignore[misc]
        for row in (r for _, r in frame.iterrows())
    }


def scrapes(page: str, steps_mj: dict[int, float], n: int = 3) -> list[str]:
    """`n` scrapes of the recorded page, each GPU's counter `steps_mj` further each time."""
    text = (DATA / page).read_text()
    start = {gpu: v for (gpu, _), v in values(text, ENERGY_FIELD).items()}
    return [
        rewrite(text, ENERGY_FIELD, {g: start[g] + k * d for g, d in steps_mj.items()})
        for k in range(n)
    ]


def power(page: str) -> dict[int, float]:
    return {
        gpu: v
        for (gpu, _), v in values((DATA / page).read_text(), "DCGM_FI_DEV_POWER_USAGE").items()
    }


def test_energy_is_the_counter_delta_with_the_last_sample_integrated_from_power() -> None:
    watts = power("h100_slurm_main.prom")
    steps = {gpu: round(w * STEP_S * 1000) for gpu, w in watts.items()}  # mJ per scrape
    jobs = per_job(warehouse(scrapes("h100_slurm_main.prom", steps)))

    def expected(gpus: list[int]) -> float:
        # two counter deltas, then the job's last sample: its power over the typical 30 s
        return sum(2 * steps[g] / 1000 + watts[g] * STEP_S for g in gpus)

    assert jobs["a"]["joules"] == pytest.approx(expected([0, 1, 2, 3]), rel=1e-12)
    assert jobs["b"]["joules"] == pytest.approx(expected([4, 5, 6]), rel=1e-12)
    assert jobs[None]["joules"] == pytest.approx(expected([7]), rel=1e-12)
    assert jobs["a"]["source"] == "mixed"  # counter, and power for the last sample


def test_a_counter_reset_integrates_power_over_that_interval_only() -> None:
    watts = power("h100_slurm_main.prom")
    steps = {gpu: round(w * STEP_S * 1000) for gpu, w in watts.items()}
    pages = scrapes("h100_slurm_main.prom", steps, n=3)
    # the driver reloaded on GPU 0 between the first two scrapes: its counter starts over
    pages[1] = rewrite(pages[1], ENERGY_FIELD, {0: 4000})
    pages[2] = rewrite(pages[2], ENERGY_FIELD, {0: 4000 + steps[0]})
    jobs = per_job(warehouse(pages))
    gpu0 = watts[0] * STEP_S + steps[0] / 1000 + watts[0] * STEP_S  # power, counter, power
    others = sum(2 * steps[g] / 1000 + watts[g] * STEP_S for g in (1, 2, 3))
    assert jobs["a"]["joules"] == pytest.approx(gpu0 + others, rel=1e-12)
    assert jobs["a"]["joules"] > 0


def test_without_the_counter_energy_is_power_integrated() -> None:
    text = (DATA / "v100_legacy.prom").read_text()
    text = "\n".join(line for line in text.splitlines() if ENERGY_FIELD not in line) + "\n"
    watts = power("v100_legacy.prom")
    jobs = per_job(warehouse([text] * 3))
    allocated = [g for g in watts if g in JOBS and JOBS[g] == "a"]
    assert jobs["a"]["joules"] == pytest.approx(sum(3 * watts[g] * STEP_S for g in allocated))
    assert jobs["a"]["source"] == "power"


def test_mig_instances_share_their_devices_counter() -> None:
    text = (DATA / "a100_mig.prom").read_text()
    instances = values(text, ENERGY_FIELD)
    assert len(instances) > len({gpu for gpu, _ in instances})  # several instances per device
    steps = {gpu: 300_000.0 for gpu, _ in instances}  # 300 J per scrape per device
    jobs = per_job(warehouse(scrapes("a100_mig.prom", steps, n=2)))
    counted = 300.0 * len(steps)  # one delta per device, split over its instances
    # the last scrape: each instance's row carries a device reading, shared by its 2 instances
    last = sum(w * STEP_S for w in values(text, "DCGM_FI_DEV_POWER_USAGE").values()) / 2
    total = sum(j["joules"] for j in jobs.values())
    assert total == pytest.approx(counted + last, rel=1e-12)


def test_idle_allocated_energy_is_the_energy_of_samples_at_zero_utilization() -> None:
    watts = power("h100_slurm_main.prom")
    steps = {gpu: round(w * STEP_S * 1000) for gpu, w in watts.items()}
    pages = [
        rewrite(p, "DCGM_FI_DEV_GPU_UTIL", {1: 0}) for p in scrapes("h100_slurm_main.prom", steps)
    ]
    jobs = per_job(warehouse(pages))
    assert jobs["a"]["idle_joules"] == pytest.approx(2 * steps[1] / 1000 + watts[1] * STEP_S)
    assert jobs["b"]["idle_joules"] == 0
