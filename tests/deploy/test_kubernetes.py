"""deploy/kubernetes is what a team applies: every object passes Kubernetes' own OpenAPI schemas
(kubernetes-validate, strict, schemas bundled: no cluster here), every container runs with a
read-only root and (all but the agent) as non-root, every path a container writes is absolute and
on a declared writable volume, agent and ingest speak TLS with their certificates on volumes, and
every Service reaches a workload. The Dockerfiles build from the repository: their COPY sources
exist, and the agent image's install step, replayed on exactly what it copies, builds a wheel
with the core and the collector only (no Docker engine here: the closest real check)."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

import kubernetes_validate
import pytest
import yaml

from fleetscope.settings import SETTINGS

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "kubernetes"
BY_ENV = {s.env: s for s in SETTINGS}
# Server TLS settings land with issue 12 (ingest hardening) in parallel; named here until then.
PENDING_SETTINGS = {"FLEETSCOPE_SERVER_TLS_CERT_FILE", "FLEETSCOPE_SERVER_TLS_KEY_FILE"}
WORKLOADS = {"DaemonSet", "Deployment", "StatefulSet"}
# Settings that name a path the process writes (files or folders under it).
WRITTEN = {"core.data_dir", "agent.spool_dir", "agent.sdk_socket", "agent.trace_dir"}
# Workloads that only read the data folder (segments, traces) and write nothing under it.
READERS = {"fleetscope-dashboard"}


def documents() -> list[tuple[str, dict[str, Any]]]:
    return [
        (path.name, doc)
        for path in sorted(K8S.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]


def workloads() -> list[dict[str, Any]]:
    return [doc for _, doc in documents() if doc["kind"] in WORKLOADS]


def containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    pod = workload["spec"]["template"]["spec"]
    found: list[dict[str, Any]] = pod.get("initContainers", []) + pod["containers"]
    return found


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def under(path: str, folder: str) -> bool:
    return PurePosixPath(path).is_relative_to(PurePosixPath(folder))


def test_the_folder_holds_every_part() -> None:
    kinds = {(doc["kind"], doc["metadata"]["name"]) for _, doc in documents()}
    assert kinds >= {
        ("Namespace", "fleetscope"),
        ("DaemonSet", "fleetscope-agent"),
        ("StatefulSet", "fleetscope-ingest"),
        ("Service", "fleetscope-ingest"),
        ("PersistentVolumeClaim", "fleetscope-data"),
        ("Deployment", "fleetscope-worker"),
        ("Deployment", "fleetscope-beat"),
        ("Deployment", "fleetscope-dashboard"),
        ("Service", "fleetscope-dashboard"),
    }
    assert sorted(p.name for p in K8S.glob("*.yaml"))[0] == "00-namespace.yaml"  # applied first


@pytest.mark.parametrize("name,doc", documents(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_object_passes_the_kubernetes_schema(name: str, doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


def test_the_validator_rejects_a_misspelled_field() -> None:
    """A negative control: the schemas are really loaded and strict mode sees unknown fields."""
    (agent,) = [w for w in workloads() if w["kind"] == "DaemonSet"]
    broken = yaml.safe_load(yaml.safe_dump(agent))
    broken["spec"]["template"]["spec"]["containers"][0]["securityContext"][
        "readOnlyRootFilesytem"
    ] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, kubernetes_validate.latest_version(), strict=True)


def test_every_container_has_a_readonly_root_and_only_the_agent_runs_as_root() -> None:
    for workload in workloads():
        pod = workload["spec"]["template"]["spec"]
        for container in containers(workload):
            security = container["securityContext"]
            name = f"{workload['metadata']['name']}/{container['name']}"
            assert security["readOnlyRootFilesystem"] is True, name
            assert security["allowPrivilegeEscalation"] is False, name
            assert security["capabilities"]["drop"] == ["ALL"], name
            if workload["metadata"]["name"] == "fleetscope-agent":
                # kubelet.sock and other users' /proc/<pid>/environ are root's (docs/deploy.md)
                assert security["runAsUser"] == 0
                assert security["capabilities"].get("add") == ["SYS_PTRACE"]
                continue
            assert "add" not in security["capabilities"], name
            merged = {**pod.get("securityContext", {}), **security}
            assert merged["runAsNonRoot"] is True and merged["runAsUser"] != 0, name


def test_every_written_path_is_absolute_on_a_declared_writable_volume() -> None:
    for workload in workloads():
        pod = workload["spec"]["template"]["spec"]
        volumes = {v["name"] for v in pod["volumes"]}
        for container in containers(workload):
            name = f"{workload['metadata']['name']}/{container['name']}"
            mounts = container.get("volumeMounts", [])
            assert {m["name"] for m in mounts} <= volumes, name
            writable = [m["mountPath"] for m in mounts if not m.get("readOnly")]
            readable = [m["mountPath"] for m in mounts]
            assert all(PurePosixPath(p).is_absolute() for p in readable), name
            assert any(under("/tmp", p) for p in writable), f"{name}: /tmp is not a volume"
            for var, value in env_of(container).items():
                setting = BY_ENV.get(var)
                if var in PENDING_SETTINGS or (setting and setting.type == "path" and value):
                    assert PurePosixPath(value).is_absolute(), f"{name}: {var}={value}"
                    written = setting and setting.key in WRITTEN
                    reader = workload["metadata"]["name"] in READERS
                    folders = writable if written and not reader else readable
                    assert any(under(value, f) for f in folders), f"{name}: {var}={value}"
            command = container.get("command", []) + container.get("args", [])
            if "--schedule" in command:  # celery beat's schedule file
                schedule = command[command.index("--schedule") + 1]
                assert any(under(schedule, f) for f in writable), name


def test_agent_ships_over_tls_to_the_ingest_service_with_certificates_on_volumes() -> None:
    by_name = {(d["kind"], d["metadata"]["name"]): d for _, d in documents()}
    agent = env_of(
        by_name["DaemonSet", "fleetscope-agent"]["spec"]["template"]["spec"]["containers"][0]
    )
    service = by_name["Service", "fleetscope-ingest"]
    url = re.fullmatch(
        r"https://([^.:]+)\.([^.:]+)\.svc:(\d+)", agent["FLEETSCOPE_AGENT_INGEST_URL"]
    )
    assert url is not None
    assert url.group(1, 2) == (service["metadata"]["name"], service["metadata"]["namespace"])
    assert int(url.group(3)) == service["spec"]["ports"][0]["port"]
    assert agent["FLEETSCOPE_AGENT_TLS_CA_FILE"] == "/etc/fleetscope/ca/ca.crt"
    ingest_pod = by_name["StatefulSet", "fleetscope-ingest"]["spec"]["template"]["spec"]
    ingest = env_of(ingest_pod["containers"][0])
    tls_volume = {v["name"]: v for v in ingest_pod["volumes"]}["tls"]
    assert tls_volume["secret"]["secretName"] == "fleetscope-ingest-tls"
    assert ingest["FLEETSCOPE_SERVER_TLS_CERT_FILE"] == "/etc/fleetscope/tls/tls.crt"
    assert ingest["FLEETSCOPE_SERVER_TLS_KEY_FILE"] == "/etc/fleetscope/tls/tls.key"
    for probe in ("readinessProbe", "livenessProbe"):
        assert ingest_pod["containers"][0][probe]["httpGet"]["scheme"] == "HTTPS"


def test_services_reach_a_workload_port_and_singletons_stay_single() -> None:
    pods = {w["metadata"]["name"]: w["spec"]["template"] for w in workloads()}
    for _, doc in documents():
        if doc["kind"] != "Service":
            continue
        targets = [
            t
            for t in pods.values()
            if doc["spec"]["selector"].items() <= t["metadata"]["labels"].items()
        ]
        assert len(targets) == 1, doc["metadata"]["name"]
        ports = {p["name"] for c in targets[0]["spec"]["containers"] for p in c.get("ports", [])}
        assert {p["targetPort"] for p in doc["spec"]["ports"]} <= ports
    singles = {w["metadata"]["name"]: w["spec"] for w in workloads()}
    assert singles["fleetscope-ingest"]["replicas"] == 1  # one DuckDB writer
    assert singles["fleetscope-beat"]["replicas"] == 1  # one beat
    assert singles["fleetscope-beat"]["strategy"]["type"] == "Recreate"


def test_every_fleetscope_variable_is_a_setting() -> None:
    for workload in workloads():
        for container in containers(workload):
            names = {n for n in env_of(container) if n.startswith("FLEETSCOPE_")}
            assert names <= set(BY_ENV) | PENDING_SETTINGS, names - set(BY_ENV)


DOCKERFILES = {
    "agent": ROOT / "deploy" / "Dockerfile",
    "server": ROOT / "deploy" / "Dockerfile.server",
}


def copied(dockerfile: Path) -> list[str]:
    """The sources of every COPY line (all words between COPY and the destination)."""
    lines = [line.split() for line in dockerfile.read_text().splitlines()]
    return [src for words in lines if words[:1] == ["COPY"] for src in words[1:-1]]


@pytest.mark.parametrize("image", sorted(DOCKERFILES))
def test_dockerfile_copies_what_exists_and_runs_non_root_from_a_readonly_friendly_layout(
    image: str,
) -> None:
    text = DOCKERFILES[image].read_text()
    for source in copied(DOCKERFILES[image]):
        assert (ROOT / source).exists(), source
    user = re.findall(r"^USER (\S+)", text, re.M)
    assert user and user[-1].split(":")[0] not in {"0", "root"}
    assert re.search(r'pip install --no-cache-dir "\.\[(agent|dashboard)\]"', text)


@pytest.mark.slow
def test_agent_image_install_builds_from_exactly_what_it_copies(tmp_path: Path) -> None:
    """Replay the agent Dockerfile's COPY lines into a bare context and build the wheel there."""
    import shutil

    context = tmp_path / "src"
    context.mkdir()
    for source in copied(DOCKERFILES["agent"]):
        origin = ROOT / source
        if origin.is_dir():
            shutil.copytree(origin, context / source, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(origin, context / source)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path / "wheel"), str(context)],
        capture_output=True, text=True, check=False, timeout=240,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (wheel,) = (tmp_path / "wheel").glob("fleetscope-*.whl")
    packages = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {"fleetscope", "collector"} <= packages
    assert not packages & {"warehouse", "analyzers", "dashboard"}
