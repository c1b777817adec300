"""`fleetscope-agent once` and `check` against the fleet simulator's dcgm-exporter endpoints: every
host kind (Kubernetes and Slurm labels, MIG) gives one canonical record per GPU or MIG slice with
the page's values, and `check` passes against a live ingest peer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from collector.cli import main
from fleetscope.contract import GPU_SAMPLES
from simulator.fleet import FleetSpec
from simulator.serve import ExporterFleet
from simulator.sim import FleetSimulator

T0 = 1_760_000_000
NOW = T0 + 900


@pytest.fixture(autouse=True)
def _no_config_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLEETSCOPE_CONFIG", raising=False)
    monkeypatch.setenv("FLEETSCOPE_AGENT_PROC_ROOT", "")


@pytest.fixture(scope="module")
def fleet() -> Iterator[tuple[FleetSimulator, ExporterFleet]]:
    sim = FleetSimulator(FleetSpec(hosts=4, seed=9, scrape_failure_rate=0.0), origin_s=T0,
                         horizon_s=3600)  # fmt: skip
    served = ExporterFleet(sim, lambda: float(NOW)).start()
    yield sim, served
    served.stop()


def expected(page: str) -> dict[tuple[int, int | None], tuple[str, float, bool]]:
    """(gpu, MIG instance) -> (host label, POWER_USAGE, has a job label), by prometheus_client."""
    out = {}
    for family in text_string_to_metric_families(page):
        if family.name != "DCGM_FI_DEV_POWER_USAGE":
            continue
        for s in family.samples:
            mig = s.labels.get("GPU_I_ID")
            host = s.labels.get("Hostname") or s.labels.get("hostname") or ""
            job = bool(s.labels.get("hpc_job") or s.labels.get("pod"))
            out[(int(s.labels["gpu"]), int(mig) if mig else None)] = (host, s.value, job)
    return out


def test_once_gives_one_record_per_gpu_or_slice_on_every_host_kind(
    fleet: tuple[FleetSimulator, ExporterFleet], capsys: pytest.CaptureFixture[str]
) -> None:
    sim, served = fleet
    urls = served.urls()
    kinds = set()
    for host in sim.hosts:
        kinds.add((host.scheduler, host.mig))
        assert main(["once", "--dcgm-url", urls[host.name], "--format", "json"]) == 0
        records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert all(list(r) == GPU_SAMPLES.names for r in records)
        got = {
            (r["gpu_index"], r["mig_instance_id"]): (
                r["host"],
                r["power_w"],
                r["job_id"] is not None,
            )
            for r in records
        }
        assert got == expected(sim.page(host, NOW))
        assert len(records) == len(got)
    assert kinds == {("k8s", False), ("slurm", False), ("k8s", True)}  # every kind was covered


def test_check_passes_against_the_simulator_and_a_live_ingest(
    fleet: tuple[FleetSimulator, ExporterFleet],
    ingest: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sim, served = fleet
    monkeypatch.setenv("FLEETSCOPE_AGENT_INGEST_URL", ingest.url)
    monkeypatch.setenv("FLEETSCOPE_AGENT_TOKEN", "t0ken")
    host = sim.hosts[0]
    assert main(["check", "--dcgm-url", served.urls()[host.name]]) == 0
    out = capsys.readouterr().out
    units = len(expected(sim.page(host, NOW)))
    assert (
        f"OK   exporter: {served.urls()[host.name]} answers; {units} GPUs or MIG instances" in out
    )
    assert "OK   ingest: token accepted" in out
    assert "FAIL" not in out
    assert len([line for line in out.splitlines() if line.startswith("     gpu ")]) == units
