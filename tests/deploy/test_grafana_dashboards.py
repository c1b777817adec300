"""deploy/grafana: the fleet and job dashboards are Grafana dashboard JSON models (checked by
structure: no Grafana here), every panel query is valid PromQL (promtool parses it as a recording
rule once the dashboard variables are substituted), and every metric they chart is one the server's
/metrics really exports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

GRAFANA = Path(__file__).resolve().parents[2] / "deploy" / "grafana"
DASHBOARDS = sorted(GRAFANA.glob("*.json"))

# The families the server's /metrics exports (warehouse.ingest.metrics, analyzers.prometheus_export),
# as Prometheus stores them (counters with `_total`).
EXPORTED = {
    "fleetscope_recoverable_gpu_seconds",
    "fleetscope_findings_open",
    "fleetscope_job_gpu_efficiency_ratio",
    "fleetscope_allocated_gpu_seconds_total",
    "fleetscope_active_gpu_seconds_total",
    "fleetscope_sm_active_gpu_seconds_total",
    "fleetscope_ingest_requests_total",
    "fleetscope_writer_queued_rows",
    "fleetscope_writer_failed_flushes_total",
}
VARIABLES = {"$__rate_interval": "5m", "$cluster": ".*", "$team": ".*", "$job_id": ".*"}


def load(path: Path) -> dict[str, Any]:
    model: dict[str, Any] = json.loads(path.read_text())
    return model


def exprs(model: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in model["panels"] for t in p["targets"]]


def substituted(expr: str) -> str:
    for name, value in VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


def test_there_is_a_fleet_and_a_job_dashboard() -> None:
    assert [p.name for p in DASHBOARDS] == ["fleetscope-fleet.json", "fleetscope-job.json"]
    assert [load(p)["uid"] for p in DASHBOARDS] == ["fleetscope-fleet", "fleetscope-job"]


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_dashboard_is_a_grafana_json_model(path: Path) -> None:
    model = load(path)
    assert {"uid", "title", "schemaVersion", "panels", "templating", "time"} <= model.keys()
    assert isinstance(model["schemaVersion"], int) and model["schemaVersion"] >= 36
    variables = {v["name"]: v for v in model["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in model["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in model["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]  # Grafana's grid is 24 columns wide
        area = {(x, y) for x in range(grid["x"], grid["x"] + grid["w"])
                for y in range(grid["y"], grid["y"] + grid["h"])}  # fmt: skip
        assert not area & cells, f"{panel['title']} overlaps another panel"
        cells |= area
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs))
    for expr in exprs(model) + [v["definition"] for v in variables.values() if "definition" in v]:
        used = set(re.findall(r"\bfleetscope_[a-z_]+", expr))
        assert used and used <= EXPORTED, expr
        for name in re.findall(r"\$\{?(\w+)", expr):
            assert name == "__rate_interval" or name in variables, expr


@pytest.mark.real_component("promtool")
def test_every_panel_query_is_valid_promql(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian package `prometheus`)")
    queries = [substituted(e) for path in DASHBOARDS for e in exprs(load(path))]
    rules = [{"record": f"dashboard:query{i}", "expr": q} for i, q in enumerate(queries)]
    (tmp_path / "queries.yml").write_text(
        yaml.safe_dump({"groups": [{"name": "q", "rules": rules}]})
    )
    result = subprocess.run(
        [promtool, "check", "rules", "queries.yml"], cwd=tmp_path, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(queries)} rules found" in result.stdout
