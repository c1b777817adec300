"""Findings and GPU-hours on the server's /metrics: a real server with the `analyzers.prometheus_export`
plug-in, samples posted over HTTP, findings in its catalog, /metrics read over HTTP.

Specification (two jobs on cluster c1, `analyzers.metrics_top_jobs` = 1):
- job-a: 2 GPUs x 60 samples every 10 s, GR_ENGINE_ACTIVE 0.25, SM_ACTIVE 0.1 -> 1/3 GPU-hour
  allocated, 1/12 active, 1/30 SM-active; job-b: 1 GPU x 60 samples, GR_ENGINE_ACTIVE 0.5.
- recoverable GPU-seconds per (rule, team, job_id, cluster), the job outside the top 1 as "other";
  acknowledged findings and findings older than the window are not open.
- efficiency = active / allocated GPU-hours; counters sum allocated/active/SM-active per cluster.
- job-a's SDK reports 100 one-second steps of 0.2 x the H100's bf16 peak in FLOPs: measured MFU
  0.2 (issue 32); job-b reports none, so it has no MFU series (never the DCGM proxy).
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine

from analyzers.prometheus_export import OTHER, recoverable_series, top_keys
from fleetscope.settings import Settings, load_settings
from simulator.maker.batches import gpu_batch
from simulator.wire import TEST_TOKEN, post_batch
from warehouse.catalog import findings as cat
from warehouse.catalog import fleet
from warehouse.ingest.runtime import Server

NOW = time.time()
START_MS = int((NOW - 3600) // 60 * 60 * 1000)  # an hour ago: before the settle time


def settings_for(root: Path) -> Settings:
    return load_settings(env={}).with_overrides(
        core__data_dir=str(root),
        server__port=0,
        server__tokens=TEST_TOKEN,
        server__plugins="analyzers.prometheus_export",
        warehouse__flush_interval_s=0.02,
        warehouse__maintenance_interval_s=3600.0,
        analyzers__metrics_top_jobs=1,
        analyzers__metrics_refresh_s=0.1,  # the refresh thread recomputes every 0.1 s
        analyzers__lateness_s=60.0,
    )


def batch(host: str, job: str, gpus: int, active: float) -> pa.Table:
    table = gpu_batch(
        host, start_ms=START_MS, timestamps=60, gpus=gpus, interval_ms=10_000, job_id=job,
        cluster="c1",
    )  # fmt: skip
    n = table.num_rows
    for name, value in (("gr_engine_active", active), ("sm_active", 0.1), ("gpu_util", 99.0)):
        column = table.schema.get_field_index(name)
        table = table.set_column(column, name, pa.array([value] * n, pa.float64()))
    assert pc.all(pc.equal(table["job_id"], job)).as_py()
    return table


def finding(
    fid: str, rule: str, severity: str, job: str, hours: float, age_h: float
) -> cat.Finding:
    end = datetime.now(UTC) - timedelta(hours=age_h)
    return cat.Finding(
        finding_id=fid, rule_id=rule, severity=severity, window_start=end - timedelta(hours=1),
        window_end=end, wasted_gpu_hours=hours, job_id=job, team="ml", host="h1",
    )  # fmt: skip


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = Server(settings_for(tmp_path))
    running.start()
    try:
        yield running
    finally:
        running.stop()


def populate(server: Server, ca_file: str | None = None) -> None:
    land_samples(server.url, ca_file)
    land_findings(server.catalog)


def land_steps(url: str) -> None:
    from collector.sdk.receiver import steps_table

    rows = [
        {"pid": 9, "job_id": "job-a", "rank": 0, "step": i, "ts": START_MS / 1000 + 60 + i,
         "step_time_s": 1.0, "flops_per_step": 0.2 * 989.5e12, "compute_dtype": "bf16"}
        for i in range(100)
    ]  # fmt: skip
    table = steps_table(rows, host="h1", cluster="c1")
    assert post_batch(url, "step_samples", table, token=TEST_TOKEN).status == 202


def land_samples(url: str, ca_file: str | None = None) -> None:
    """Both jobs' samples in one batch: one commit, so no refresh counts one job without the other
    (a refresh between two commits would leave the second one's samples late, never counted)."""
    both = pa.concat_tables([batch("h1", "job-a", 2, 0.25), batch("h2", "job-b", 1, 0.5)])
    answer = post_batch(url, "gpu_samples", both, token=TEST_TOKEN, ca_file=ca_file)
    assert answer.status == 202, answer.payload


def land_findings(catalog: Engine) -> None:
    with catalog.begin() as conn:
        # job-a's record came from Slurm's prolog: its id is also its hpc_job (dcgm-exporter's)
        fleet.upsert_jobs(
            conn, [fleet.Job("job-a", cluster="c1", team="ml", scheduler="slurm-prolog")]
        )
        cat.upsert_findings(
            conn,
            [
                finding("f1", "R1", "warn", "job-a", 2.0, age_h=1),
                finding("f2", "R17", "critical", "job-a", 1.5, age_h=2),
                finding("f3", "R1", "warn", "job-b", 0.5, age_h=1),
                finding("f4", "R1", "warn", "job-b", 9.0, age_h=30),  # before the 24 h window
                finding("f5", "R2", "warn", "job-a", 7.0, age_h=1),  # acknowledged below
            ],
            run_id=None,
        )
        cat.set_finding_state(conn, "f5", "acknowledged")


def scrape(url: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    request = urllib.request.Request(
        f"{url}/metrics", headers={"Authorization": f"Bearer {TEST_TOKEN}"}
    )  # server.read_auth is on: /metrics names jobs and teams
    with urllib.request.urlopen(request, timeout=30) as answer:
        text = answer.read().decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = tuple(sorted(sample.labels.items()))
            out.setdefault(sample.name, {})[key] = sample.value
    return out


def series(
    metrics: dict[str, dict[tuple[tuple[str, str], ...], float]], name: str
) -> dict[str, float]:
    return {
        ",".join(v for _, v in k): round(value, 6) for k, value in metrics.get(name, {}).items()
    }


@pytest.mark.slow
def test_metrics_report_findings_efficiency_and_gpu_hours(server: Server) -> None:
    land_steps(server.url)
    populate(server)
    deadline = time.monotonic() + 60
    while True:  # until a refresh after the commit and the findings
        metrics = scrape(server.url)
        refreshed = all(
            series(metrics, name)
            for name in (
                "fleetscope_allocated_gpu_seconds_total",
                "fleetscope_findings_open",
                "fleetscope_job_mfu_ratio",
            )
        )
        if refreshed or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    # labels sorted by name: cluster, hpc_job, job_id, rule, team
    assert series(metrics, "fleetscope_recoverable_gpu_seconds") == {  # GPU-hours x 3600
        "c1,job-a,job-a,R1,ml": 7200.0,
        "c1,job-a,job-a,R17,ml": 5400.0,
        "c1,,other,R1,ml": 1800.0,
    }
    assert series(metrics, "fleetscope_findings_open") == {  # rule, severity, team
        "R1,warn,ml": 2.0,
        "R17,critical,ml": 1.0,
    }
    assert series(metrics, "fleetscope_job_gpu_efficiency_ratio") == {  # hpc_job, job_id, team
        "job-a,job-a,ml": 0.25,
        ",other,ml": 0.5,  # job-b: not in the catalog; its team comes from its finding
    }
    # dtype, gpu_model, hpc_job, job_id, team
    assert series(metrics, "fleetscope_job_mfu_ratio") == {
        "bf16,NVIDIA H100 80GB HBM3,job-a,job-a,ml": 0.2
    }
    assert series(metrics, "fleetscope_allocated_gpu_seconds_total") == {"c1": 1800.0}  # 0.5 h
    assert series(metrics, "fleetscope_active_gpu_seconds_total") == {"c1": 600.0}  # 1/12 + 1/12 h
    assert series(metrics, "fleetscope_sm_active_gpu_seconds_total") == {"c1": 180.0}  # 0.05 h
    # issue 32: the batch maker's power over the same 0.5 GPU-hours (no energy counter)
    assert set(series(metrics, "fleetscope_allocated_gpu_energy_joules_total")) == {"c1"}
    assert series(metrics, "fleetscope_allocated_gpu_energy_joules_total")["c1"] > 0
    assert series(metrics, "fleetscope_fleet_metrics_refresh_failures_total") == {"": 0.0}
    refreshed = series(metrics, "fleetscope_fleet_metrics_refreshed_timestamp_seconds")[""]
    assert NOW - 5 <= refreshed <= time.time()
    # Every family the Grafana dashboards chart is really exported.
    from tests.deploy.test_grafana_dashboards import EXPORTED

    assert set(metrics) >= EXPORTED
    # A second scrape adds nothing: the same samples are never counted twice.
    assert series(scrape(server.url), "fleetscope_allocated_gpu_seconds_total") == {"c1": 1800.0}


def test_top_jobs_are_by_hours_then_name_and_the_rest_is_other() -> None:
    assert top_keys({"b": 1.0, "a": 1.0, "c": 3.0}, 2) == {"c", "a"}
    assert top_keys({"a": 1.0}, 0) == set()


def test_metrics_names_follow_prometheus_rules() -> None:
    """Prefix, base unit in the name, `_total` only on counters, `_ratio` for 0-1 values."""
    from prometheus_client import CollectorRegistry

    from analyzers.prometheus_export import FleetCollector, Snapshot

    collector = FleetCollector(
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        window_s=1, top_jobs=1, refresh_s=1e9, lateness_s=0, default_interval_s=10, max_gap_s=300,
        clock=lambda: 0.0,
    )  # fmt: skip
    collector._refreshed_at = 0.0  # served as is: no catalog needed
    collector._snapshot = Snapshot()
    registry = CollectorRegistry()
    registry.register(collector)
    names = {m.name: m.type for m in registry.collect()}
    assert names == {
        "fleetscope_recoverable_gpu_seconds": "gauge",
        "fleetscope_recoverable_energy_joules": "gauge",
        "fleetscope_recoverable_money": "gauge",
        "fleetscope_findings_open": "gauge",
        "fleetscope_job_gpu_efficiency_ratio": "gauge",
        "fleetscope_job_mfu_ratio": "gauge",
        "fleetscope_allocated_gpu_seconds": "counter",
        "fleetscope_active_gpu_seconds": "counter",
        "fleetscope_sm_active_gpu_seconds": "counter",
        "fleetscope_allocated_gpu_energy_joules": "counter",
        "fleetscope_idle_allocated_gpu_energy_joules": "counter",
        "fleetscope_fleet_metrics_refreshed_timestamp_seconds": "gauge",
        "fleetscope_fleet_metrics_refresh_failures": "counter",
    }
    assert recoverable_series([], {}, 3) == {}
    assert OTHER == "other"


def test_recoverable_energy_and_money_follow_the_gpu_hours_series() -> None:
    """Joules and money on the GPU-hours family's series (same top jobs, same "other"); money
    only from findings with a price, labelled with its currency."""
    from analyzers.findings import Finding
    from analyzers.prometheus_export import recoverable_energy
    from analyzers.run.results import StoredFinding

    def stored(job: str, hours: float, **evidence: object) -> StoredFinding:
        end = datetime(2026, 11, 23, tzinfo=UTC)
        found = Finding(
            rule_id="R1", severity="warn", job_id=job, host="h1", gpus=("0",),
            window_start=end - timedelta(hours=1), window_end=end, title="idle",
            recommendation="-", wasted_gpu_hours=hours, estimate_method="-",
            evidence=evidence, team="ml",
        )  # fmt: skip
        return StoredFinding(found, "open", None, None)

    findings = [
        stored("job-a", 2.0, recoverable_kwh=0.14, recoverable_money=5.0, currency="USD"),
        stored("job-b", 1.0, recoverable_kwh=0.07),  # no price for its GPUs
        stored("job-c", 0.5),  # no energy reading
    ]
    joules, money = recoverable_energy(findings, {"job-a": "c1", "job-b": "c1"}, top_jobs=1)
    assert joules == {
        ("R1", "ml", "job-a", "c1"): 0.14 * 3.6e6,
        ("R1", "ml", OTHER, "c1"): 0.07 * 3.6e6,
    }
    assert money == {("R1", "ml", "job-a", "c1", "USD"): 5.0}


def test_energy_series_carry_the_labels_of_the_gpu_seconds_series() -> None:
    """So `fleetscope_recoverable_energy_joules / fleetscope_recoverable_gpu_seconds` matches one
    to one: the same job_id, hpc_job (a Slurm job's id) and cluster on both."""
    from analyzers.prometheus_export import FleetCollector, Snapshot

    collector = FleetCollector(
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        window_s=1, top_jobs=1, refresh_s=1e9, lateness_s=0, default_interval_s=10, max_gap_s=300,
        clock=lambda: 0.0,
    )  # fmt: skip
    collector._refreshed_at = 0.0
    collector._snapshot = Snapshot(
        recoverable={("R1", "ml", "918273", "c1"): 2.0, ("R1", "ml", OTHER, "c1"): 1.0},
        recoverable_joules={("R1", "ml", "918273", "c1"): 5e5, ("R1", "ml", OTHER, "c1"): 2e5},
        recoverable_money={("R1", "ml", "918273", "c1", "USD"): 4.0},
        slurm_jobs=frozenset({"918273"}),
    )
    families = {f.name: f for f in collector.collect()}

    def labels(name: str) -> list[dict[str, str]]:
        return [s.labels for s in families[name].samples]

    seconds = labels("fleetscope_recoverable_gpu_seconds")
    assert seconds == labels("fleetscope_recoverable_energy_joules")
    assert seconds == [
        {"rule": "R1", "team": "ml", "job_id": "918273", "hpc_job": "918273", "cluster": "c1"},
        {"rule": "R1", "team": "ml", "job_id": OTHER, "hpc_job": "", "cluster": "c1"},
    ]
    assert labels("fleetscope_recoverable_money") == [{**seconds[0], "currency": "USD"}]
    assert [s.value for s in families["fleetscope_recoverable_gpu_seconds"].samples] == [
        7200.0, 3600.0,
    ]  # fmt: skip
