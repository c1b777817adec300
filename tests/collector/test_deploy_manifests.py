"""The deploy/ manifests are well-formed and say what the agent needs: checked by structure (no
cluster or Docker daemon here), and every FLEETSCOPE_* variable they set is a real setting."""

from __future__ import annotations

import configparser
import csv
from pathlib import Path
from typing import Any

import yaml

from fleetscope.dcgm_fields import FIELDS, PROFILING_FIELDS
from fleetscope.settings import SETTINGS

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SETTING_ENVS = {s.env for s in SETTINGS}


def _cpu_millicores(value: str) -> float:
    return float(value[:-1]) if value.endswith("m") else float(value) * 1000


def _mebibytes(value: str) -> float:
    units = {"Ki": 1 / 1024, "Mi": 1.0, "Gi": 1024.0}
    return float(value[:-2]) * units[value[-2:]]


def test_daemonset_matches_dcgm_exporter_placement_and_is_small() -> None:
    docs = list(yaml.safe_load_all((DEPLOY / "kubernetes" / "base" / "agent.yaml").read_text()))
    (ds,) = [d for d in docs if d["kind"] == "DaemonSet"]
    assert ds["apiVersion"] == "apps/v1"
    spec: dict[str, Any] = ds["spec"]
    pod = spec["template"]["spec"]
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    assert pod["nodeSelector"] == {"nvidia.com/gpu.deploy.dcgm-exporter": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod[
        "tolerations"
    ]
    (container,) = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env["FLEETSCOPE_AGENT_HOST"]["value"] == "$(NODE_NAME)"
    assert {n for n in env if n.startswith("FLEETSCOPE_")} <= SETTING_ENVS
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["pod-gpu-resources"] == {
        "name": "pod-gpu-resources", "mountPath": "/var/lib/kubelet/pod-resources", "readOnly": True,
    }  # fmt: skip
    assert volumes["pod-gpu-resources"]["hostPath"]["path"] == "/var/lib/kubelet/pod-resources"
    assert set(mounts) == set(volumes)
    assert mounts["proc"]["readOnly"] and mounts["cgroup"]["readOnly"]
    limits = container["resources"]["limits"]
    assert _cpu_millicores(limits["cpu"]) <= 200 and _mebibytes(limits["memory"]) <= 256
    port = container["ports"][0]
    assert port["containerPort"] == int(env["FLEETSCOPE_AGENT_METRICS_PORT"]["value"])
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["SYS_PTRACE"]}


def test_counters_csv_enables_every_profiling_field_and_parses() -> None:
    lines = [
        line
        for line in (DEPLOY / "dcgm-exporter" / "counters.csv").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    rows = [[cell.strip() for cell in row] for row in csv.reader(lines)]
    assert all(len(row) >= 3 and row[1] in {"gauge", "counter", "label"} for row in rows)
    names = {row[0] for row in rows}
    assert {line.split(",")[0] for line in PROFILING_FIELDS.values()} <= names
    # Every non-label field enabled there lands in a contract column (none only in `extra`)
    known = set(FIELDS) | {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"}
    assert {row[0] for row in rows if row[1] != "label"} <= known


def test_systemd_unit_runs_the_agent_with_known_settings_and_limits() -> None:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read_string((DEPLOY / "systemd" / "fleetscope-agent.service").read_text())
    service = unit["Service"]
    assert service["ExecStart"].split()[0].endswith("/fleetscope-agent")
    assert service["ExecStart"].split()[-1] == "run"
    assert service["Restart"] == "always"
    assert service["MemoryMax"] and service["CPUQuota"]
    env_lines = (DEPLOY / "systemd" / "fleetscope-agent.service").read_text().splitlines()
    names = {line.split("=", 2)[1] for line in env_lines if line.startswith("Environment=")}
    assert names and names <= SETTING_ENVS
    assert unit["Install"]["WantedBy"] == "multi-user.target"


def test_compose_file_wires_exporter_ingest_and_agent() -> None:
    compose = yaml.safe_load((DEPLOY / "compose" / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"dcgm-exporter", "ingest", "agent"}
    agent_env = services["agent"]["environment"]
    assert set(agent_env) <= SETTING_ENVS
    assert set(services["ingest"]["environment"]) <= SETTING_ENVS
    assert agent_env["FLEETSCOPE_AGENT_DCGM_URL"] == "http://dcgm-exporter:9400/metrics"
    assert (
        agent_env["FLEETSCOPE_AGENT_TOKEN"]
        == services["ingest"]["environment"]["FLEETSCOPE_SERVER_TOKENS"]
    )
    spool_volume = services["agent"]["volumes"][0].split(":")[0]
    assert spool_volume in compose["volumes"]
    assert (
        DEPLOY
        / "compose"
        / services["agent"]["build"]["context"]
        / services["agent"]["build"]["dockerfile"]
    ).exists()
    assert "../dcgm-exporter/counters.csv" in services["dcgm-exporter"]["volumes"][0]


def test_compose_publishes_ingest_on_loopback_with_a_token_the_user_must_choose() -> None:
    services = yaml.safe_load((DEPLOY / "compose" / "compose.yaml").read_text())["services"]
    assert services["ingest"]["ports"] == ["127.0.0.1:8470:8470"]
    token = services["ingest"]["environment"]["FLEETSCOPE_SERVER_TOKENS"]
    assert token.startswith("${FLEETSCOPE_TOKEN:?")  # compose refuses to start without one
