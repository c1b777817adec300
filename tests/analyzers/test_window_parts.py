"""A window cut per cluster (fleet mode's parts) lands what one read of it lands: the same
findings by id, a fleet-wide rule combined over the parts, and a part's failure failing its
analyzer for the window without dropping what it found before. Real DuckDB, real SQLite catalog;
the Celery and Iceberg version is tests/fleet/test_fleet_scheduled_parts.py."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

import duckdb
import pytest

from analyzers.accounting.frames import FrameParams
from analyzers.base import JobCatalog, JobInfo, PartitionKey, StaticJobCatalog, load_analyzers
from analyzers.findings import Finding, Severity
from analyzers.run.parts import WHOLE, Part, Scope
from analyzers.run.results import FindingStore
from analyzers.run.runner import Pipeline
from analyzers.run.window import Window
from simulator.maker.series import T0, Fleet
from warehouse import catalog

IDLE: dict[str, Any] = {
    "gpu_util": 0.0,
    "gr_engine_active": 0.0,
    "sm_active": 0.0,
    "tensor_active": 0.0,
}
WINDOW = Window(T0, T0 + timedelta(days=1))
# cy's two jobs hold 32 GPU-hours each, at 10 %: only together past R4's 50 GPU-hour floor
CATALOG = StaticJobCatalog(
    [JobInfo(f"cy-{c}", "cy", "ml") for c in ("east", "west")]
    + [JobInfo(f"idle-{c}", "di", "ml") for c in ("east", "west")]
)


def fleet() -> Fleet:
    fleet = Fleet()
    for c in ("east", "west"):
        fleet.gpus(f"cy-{c}", f"{c}-1", range(8), 0, 240, gpu_util=10.0)
        fleet.gpus(f"idle-{c}", f"{c}-2", range(2), 0, 120, **IDLE)
        fleet.gpus(f"low-{c}", f"{c}-3", range(1), 0, 120, gpu_util=10.0)
    for row in fleet.gpu_rows:
        row["cluster"] = row["host"].split("-")[0]
    return fleet


def part_conn(data: Fleet, cluster: str) -> duckdb.DuckDBPyConnection:
    conn = data.connect()
    conn.execute("DELETE FROM gpu_samples WHERE cluster IS DISTINCT FROM ?", [cluster])
    return conn


def store_at(path: Path) -> FindingStore:
    return FindingStore(catalog.connect(f"sqlite:///{path}"))


def stored(store: FindingStore) -> list[tuple[Any, ...]]:
    return sorted(
        (f.finding_id, f.rule_id, f.job_id, f.wasted_gpu_hours, f.user,
         json.dumps(f.evidence, sort_keys=True))
        for f in (s.finding for s in store.findings())
    )  # fmt: skip


def parts(pipeline: Pipeline, data: Fleet, window: Window) -> list[Part]:
    out = []
    for cluster in ("east", "west"):
        conn = part_conn(data, cluster)
        try:
            out.append(pipeline.run_part(conn, window, CATALOG, cluster))
        finally:
            conn.close()
    return [Part.from_dict(json.loads(json.dumps(p.to_dict()))) for p in out]  # as Celery sends


@pytest.mark.parametrize("partitions", [1, 2])
def test_parts_per_cluster_land_what_one_read_lands(tmp_path: Path, partitions: int) -> None:
    data, pipeline = fleet(), Pipeline(tuple(load_analyzers()), FrameParams())
    whole, cut = store_at(tmp_path / "whole.sqlite"), store_at(tmp_path / "cut.sqlite")
    for p in range(partitions):
        window = Window(WINDOW.start, WINDOW.end, p, partitions)
        assert pipeline.run(data.connect(), window, CATALOG, whole).errors == {}
        assert pipeline.land_parts(parts(pipeline, data, window), window, CATALOG, cut).errors == {}
    assert ("R4", None, "cy") in {(f[1], f[2], f[4]) for f in stored(cut)}  # both clusters' hours
    assert stored(cut) == stored(whole)


@dataclass
class FleetCount:
    """A fleet-wide analyzer without `partial`/`combine`: it needs every cluster in one read."""

    name: ClassVar[str] = "fleet_count"
    rule_ids: ClassVar[tuple[str, ...]] = ("X9",)
    inputs: ClassVar[tuple[str, ...]] = ("gpu_samples",)
    partition_by: ClassVar[PartitionKey] = "none"
    thresholds: Any = None

    def run(
        self, conn: duckdb.DuckDBPyConnection, window: Window, catalog: JobCatalog
    ) -> list[Finding]:
        (hosts,) = conn.execute("SELECT count(DISTINCT host) FROM gpu_samples").fetchone() or (0,)
        return [
            Finding(rule_id="X9", severity=Severity.INFO, job_id=None, host=None, gpus=(),
                    window_start=window.start, window_end=window.end, title=f"{hosts} hosts",
                    recommendation="", wasted_gpu_hours=0.0, estimate_method="count",
                    evidence={"hosts": hosts}, scope="fleet")
        ]  # fmt: skip


def test_a_fleet_wide_analyzer_that_cannot_combine_runs_in_one_whole_part(tmp_path: Path) -> None:
    data, pipeline = fleet(), Pipeline((FleetCount(),), FrameParams())
    cut = parts(pipeline, data, WINDOW)
    assert [p.findings for p in cut] == [{}, {}]  # not in a cluster's part
    whole: Scope = WHOLE
    one = pipeline.run_part(data.connect(), WINDOW, CATALOG, whole)
    store = store_at(tmp_path / "c.sqlite")
    assert pipeline.land_parts([*cut, one], WINDOW, CATALOG, store).errors == {}
    assert [s.finding.evidence["hosts"] for s in store.findings()] == [6]


def test_an_analyzer_failing_in_one_part_fails_for_the_window_and_keeps_what_it_found(
    tmp_path: Path,
) -> None:
    data, pipeline = fleet(), Pipeline(tuple(load_analyzers()), FrameParams())
    store = store_at(tmp_path / "c.sqlite")
    assert pipeline.land_parts(parts(pipeline, data, WINDOW), WINDOW, CATALOG, store).errors == {}
    before = stored(store)
    broken = parts(pipeline, data, WINDOW)
    broken[1].errors["zero_util"] = "RuntimeError: boom"
    del broken[1].findings["zero_util"]
    result = pipeline.land_parts(broken, WINDOW, CATALOG, store)
    assert result.errors == {"zero_util": "AnalyzerFailedError: cluster west: RuntimeError: boom"}
    assert stored(store) == before  # east's R1 not landed alone: west's would read as stale


def test_a_fleet_window_needs_a_result_backend_to_land_its_parts() -> None:
    from analyzers.run.celery_app import make_app, require_result_backend
    from fleetscope.errors import ConfigError
    from fleetscope.settings import load_settings

    settings = load_settings(env={})
    require_result_backend(make_app(settings.with_overrides(celery__broker_url="redis://h:6379/0")))
    amqp = make_app(settings.with_overrides(celery__broker_url="amqp://guest@127.0.0.1:5672//"))
    with pytest.raises(ConfigError, match=r"needs a result backend: set celery\.broker_url"):
        require_result_backend(amqp)


def test_a_fleet_window_is_one_hash_slice_since_its_clusters_are_the_parallelism() -> None:
    """Each cluster's part reads that cluster's rows whole; `analyzers.partitions` slices would
    then read every cluster once per slice (four times by default)."""
    from analyzers.run.celery_app import window_slices
    from fleetscope.settings import load_settings

    settings = load_settings(env={}).with_overrides(analyzers__partitions=4)
    assert window_slices(settings) == 4
    assert window_slices(settings.with_overrides(server__mode="fleet")) == 1
