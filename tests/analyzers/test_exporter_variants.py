"""Every rule on what real exporters publish (issue 13): the same jobs, seen through the fields of
four exporter set-ups, give the rules' primary signal or their documented fallback.

The published fields come from real pages (tests/data/dcgm/, dcgm-exporter 3.x/4.x as found in
the wild) normalized by the collector, not from a list typed here:
- dcp: h100_slurm_main.prom (DCP profiling fields enabled; like every real page we hold, no
  violation counters and no clock-event reasons);
- default: the same minus SM_ACTIVE / SM_OCCUPANCY, commented out in dcgm-exporter's
  default-counters.csv;
- no profiling: v100_legacy.prom without any DCGM_FI_PROF_* field (profiling module not loaded);
- nvml: the columns collector.sources.nvml fills (GPU_UTIL, memory, clocks, power, temperature,
  violation counters) with the violation counters unsupported, as on many boards.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from analyzers.base import StaticJobCatalog
from analyzers.run.runner import Pipeline
from analyzers.run.window import Window
from fleetscope.exposition import parse
from fleetscope.normalize import normalize_samples
from simulator.maker.series import HEALTHY, T0, Fleet

DATA = Path(__file__).parents[1] / "data" / "dcgm"
PROF = {"gr_engine_active", "sm_active", "sm_occupancy", "tensor_active", "dram_active"}


def published(page: str) -> set[str]:
    """Contract columns a real exporter page fills for at least one GPU."""
    samples = parse((DATA / page).read_text()).samples
    out: set[str] = set()
    for reading in normalize_samples(samples, ts_ms=0, cluster="c"):
        out |= {k for k, v in reading.row.items() if v is not None}
    return out


VARIANTS: dict[str, set[str]] = {
    "dcp": published("h100_slurm_main.prom"),
    "default": published("h100_slurm_main.prom") - {"sm_active", "sm_occupancy"},
    "no_profiling": published("v100_legacy.prom") - PROF,
    "nvml": {
        "gpu_util", "mem_copy_util", "fb_used_mib", "fb_free_mib", "power_w", "temp_c",
        "sm_clock_mhz", "mem_clock_mhz", "xid_last", "ecc_dbe_total", "pcie_replay_total",
    },
}  # fmt: skip

# job -> (fields, the root-cause rule it must produce wherever its signal or fallback exists)
JOBS: dict[str, dict[str, Any]] = {
    "idle": {"gpu_util": 0.0, "gr_engine_active": 0.0, "sm_active": 0.0, "tensor_active": 0.0},
    "low": {"gpu_util": 12.0, "gr_engine_active": 0.12, "sm_active": 0.1},
    "hot": {
        "temp_c": 89.0,
        "sm_clock_mhz": 1095.0,
        "power_w": 520.0,
        "thermal_violation_us": lambda i, t: t * 0.6e6,
    },
    "capped": {
        "power_w": 699.0,
        "sm_clock_mhz": 1500.0,
        "power_violation_us": lambda i, t: t * 0.8e6,
    },
    "lowsm": {"sm_active": 0.3, "dram_active": 0.2},
}
EXPECTED = {"idle": "R1", "low": "R2", "hot": "R16", "capped": "R16", "lowsm": "R6"}
NEEDS = {"lowsm": {"sm_active"}}  # no fallback: SM activity cannot be inferred from GPU_UTIL


def fleet_as(variant: set[str]) -> Fleet:
    fleet = Fleet()
    for n, (job, fields) in enumerate(JOBS.items()):
        spec = {**HEALTHY, **fields}
        spec = {k: (v if k in variant or k == "gpu_model" else None) for k, v in spec.items()}
        fleet.gpus(job, f"h{n}", range(2), 0, 120, interval_s=30.0, **spec)
    return fleet


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_each_job_gets_its_root_cause_from_what_the_exporter_publishes(name: str) -> None:
    variant = VARIANTS[name]
    conn = fleet_as(variant).connect()
    found = Pipeline.default().run(conn, Window(T0, T0 + timedelta(days=1)), StaticJobCatalog())
    assert not found.errors
    top: dict[str, set[str]] = {}
    for f in found.findings:
        if f.job_id is not None:
            top.setdefault(f.job_id, set()).add(f.rule_id)
    want = {job: EXPECTED[job] for job in JOBS if NEEDS.get(job, set()) <= variant}
    assert {job: rule for job, rule in want.items() if rule in top.get(job, set())} == want
    assert set(top) - {"idle"} <= set(want), "a job without its signal produced a finding"
    if "thermal_violation_us" not in variant:
        (hot,) = [f for f in found.findings if f.job_id == "hot"]
        assert "thermal" in hot.title
        assert hot.evidence["source"] == "temperature, SM clock and power (fallback)"
        (capped,) = [f for f in found.findings if f.job_id == "capped"]
        assert "power" in capped.title


def test_the_real_pages_carry_no_violation_counters() -> None:
    for page in ("h100_slurm_main.prom", "h100_k8s_release.prom", "v100_legacy.prom"):
        assert {"power_violation_us", "thermal_violation_us"} & published(page) == set()
