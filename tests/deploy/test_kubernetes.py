"""deploy/kubernetes is what a team applies, in either mode: a base and two overlays (embedded,
fleet), rendered here as `kubectl apply -k` would (resources, recursively; no patches are used).
Every object passes Kubernetes' own OpenAPI schemas (kubernetes-validate, strict, schemas bundled:
no cluster here), and every custom resource (the Prometheus Operator's ServiceMonitor and
PrometheusRule) passes its CRD's full openAPIV3Schema from the operator's release (tests/data/crds,
applied with the API server's strict structural rules by crd_schemas.py), its metadata ObjectMeta's. Every pod of the fleetscope namespace meets the restricted Pod
Security Standard and the agent is alone in its privileged namespace; each component runs as its
own ServiceAccount with no API token; no Secret is applied (a re-apply never overwrites a token);
every path a container writes is on a declared writable volume; agents speak TLS to the ingest
Service; NetworkPolicies, disruption budgets and the ServiceMonitors select what exists; the
PrometheusRule is the shipped rule file. The Dockerfiles build from the repository: their COPY
sources exist, and the agent image's install step, replayed on exactly what it copies, builds a
wheel with the core and the collector only (no Docker engine here: the closest real check)."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from fleetscope.settings import SETTINGS

from . import crd_schemas

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "kubernetes"
OVERLAYS = ("embedded", "fleet")
BY_ENV = {s.env: s for s in SETTINGS}
WORKLOADS = {"DaemonSet", "Deployment", "StatefulSet"}
# Settings that name a path the process writes (files or folders under it).
WRITTEN = {"core.data_dir", "agent.spool_dir", "agent.sdk_socket", "agent.trace_dir"}
# Workloads that only read the data folder (segments, traces) and write nothing under it.
READERS = {"fleetscope-dashboard"}
APP = "fleetscope"  # the restricted namespace
AGENT_NS = "fleetscope-agent"  # the privileged one, the agent alone


def render(folder: Path) -> list[dict[str, Any]]:
    """The objects `kubectl apply -k folder` applies: its kustomization's resources, in order,
    a folder resource rendered the same way (the subset of kustomize these manifests use)."""
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
    assert set(kustomization) == {"apiVersion", "kind", "resources"}, folder  # no transformers
    out: list[dict[str, Any]] = []
    for resource in kustomization["resources"]:
        path = (folder / resource).resolve()
        if path.is_dir():
            out += render(path)
        else:
            out += [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    return out


def documents(overlay: str) -> list[dict[str, Any]]:
    return render(K8S / "overlays" / overlay)


def every_document() -> list[tuple[str, dict[str, Any]]]:
    """Each distinct object of either overlay once, named by kind and name."""
    seen: dict[str, dict[str, Any]] = {}
    for overlay in OVERLAYS:
        for doc in documents(overlay):
            key = (
                f"{overlay}:{doc['kind']}/{doc['metadata'].get('namespace', '')}/"
                + doc["metadata"]["name"]
            )
            if not any(doc == other for other in seen.values()):
                seen[key] = doc
    return sorted(seen.items())


def workloads(overlay: str) -> list[dict[str, Any]]:
    return [doc for doc in documents(overlay) if doc["kind"] in WORKLOADS]


def containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    pod = workload["spec"]["template"]["spec"]
    found: list[dict[str, Any]] = pod.get("initContainers", []) + pod["containers"]
    return found


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def under(path: str, folder: str) -> bool:
    return PurePosixPath(path).is_relative_to(PurePosixPath(folder))


def by_kind(overlay: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["kind"], d["metadata"]["name"]): d for d in documents(overlay)}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_overlay_holds_every_part(overlay: str) -> None:
    kinds = {(doc["kind"], doc["metadata"]["name"]) for doc in documents(overlay)}
    server = {"embedded": ("StatefulSet", "fleetscope-ingest"),
              "fleet": ("Deployment", "fleetscope-gateway")}[overlay]  # fmt: skip
    assert kinds >= {
        ("Namespace", APP), ("Namespace", AGENT_NS), ("DaemonSet", "fleetscope-agent"),
        server, ("Service", "fleetscope-ingest"), ("PersistentVolumeClaim", "fleetscope-data"),
        ("Deployment", "fleetscope-worker"), ("Deployment", "fleetscope-beat"),
        ("Deployment", "fleetscope-dashboard"), ("Service", "fleetscope-dashboard"),
        ("ConfigMap", "fleetscope-mode"), ("ServiceMonitor", "fleetscope-ingest"),
        ("ServiceMonitor", "fleetscope-agent"), ("PrometheusRule", "fleetscope"),
        ("PodDisruptionBudget", "fleetscope-worker"), ("NetworkPolicy", "default-deny-ingress"),
    }  # fmt: skip
    mode = by_kind(overlay)["ConfigMap", "fleetscope-mode"]["data"]
    assert mode["FLEETSCOPE_SERVER_MODE"] == overlay
    assert set(mode) <= set(BY_ENV)
    names = [(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"])
             for d in documents(overlay)]  # fmt: skip
    assert len(names) == len(set(names))  # nothing defined twice
    assert [d["kind"] for d in documents(overlay)][:2] == ["Namespace", "Namespace"]


def validate(doc: dict[str, Any]) -> None:
    """What the API server checks on apply: a custom resource against its CRD (its metadata as
    ObjectMeta, via the core schema of an object made of metadata alone), the rest against the
    core schemas. A kind neither knows is an error (SchemaNotFoundError), never a pass."""
    if crd_schemas.served(doc["apiVersion"], doc["kind"]):
        crd_schemas.validator(doc["apiVersion"], doc["kind"]).validate(doc)
        meta_only = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": doc["metadata"]}
        kubernetes_validate.validate(meta_only, kubernetes_validate.latest_version(), strict=True)
    else:
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


@pytest.mark.parametrize(
    "name,doc", every_document(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_object_passes_its_schema(name: str, doc: dict[str, Any]) -> None:
    validate(doc)


def test_the_custom_resources_are_the_operators_kinds() -> None:
    custom = {(d["apiVersion"], d["kind"]) for _, d in every_document()
              if d["apiVersion"].startswith("monitoring.coreos.com/")}  # fmt: skip
    assert custom == {("monitoring.coreos.com/v1", "ServiceMonitor"),
                      ("monitoring.coreos.com/v1", "PrometheusRule")}  # fmt: skip
    assert all(crd_schemas.served(*kind) for kind in custom)


def _copy(doc: dict[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = yaml.safe_load(yaml.safe_dump(doc))
    return copied


def _broken_custom_resources() -> list[tuple[str, str, dict[str, Any]]]:
    """One mistake each that the operator's CRDs (applied strictly) must refuse."""
    monitor = by_kind("fleet")["ServiceMonitor", "fleetscope-ingest"]
    rule = by_kind("fleet")["PrometheusRule", "fleetscope"]
    cases: list[tuple[str, str, dict[str, Any]]] = []
    misspelt = _copy(monitor)
    misspelt["spec"]["endpoints"][0]["bearerTokenFiel"] = "/x"
    cases.append(("unknown endpoint field", "'bearerTokenFiel' was unexpected", misspelt))
    scheme = _copy(monitor)
    scheme["spec"]["endpoints"][0]["scheme"] = "ftp"  # enum: http, https (HTTP, HTTPS)
    cases.append(("scheme outside its enum", "'ftp' is not one of", scheme))
    interval = _copy(monitor)
    interval["spec"]["endpoints"][0]["interval"] = "1 minute"  # pattern: Prometheus duration
    cases.append(("interval not a duration", "'1 minute' does not match", interval))
    secret = _copy(monitor)
    del secret["spec"]["endpoints"][0]["authorization"]["credentials"]["key"]  # required
    cases.append(("secret key missing", "'key' is a required property", secret))
    nested = _copy(monitor)
    nested["spec"]["endpoints"][0]["tlsConfig"]["ca"]["configMap"]["nme"] = "x"
    cases.append(("unknown field deep in tlsConfig", "'nme' was unexpected", nested))
    no_selector = _copy(monitor)
    del no_selector["spec"]["selector"]  # required
    cases.append(("selector missing", "'selector' is a required property", no_selector))
    meta = _copy(monitor)
    meta["metadata"]["labelz"] = {"a": "b"}  # ObjectMeta is strict too
    cases.append(("unknown metadata field", "'labelz' was unexpected", meta))
    no_expr = _copy(rule)
    del no_expr["spec"]["groups"][0]["rules"][0]["expr"]  # required
    cases.append(("rule without expr", "'expr' is a required property", no_expr))
    groups = _copy(rule)
    groups["spec"]["groups"].append(_copy(groups["spec"]["groups"][0]))  # list-map key: name
    cases.append(("two rule groups of one name", "duplicate entry for map keys", groups))
    label = _copy(rule)
    label["spec"]["groups"][0]["rules"][0]["labels"] = {"severity": 3}  # map of strings
    cases.append(("a label that is not a string", "3 is not of type 'string'", label))
    return cases


@pytest.mark.parametrize(
    "mistake,error,doc",
    [pytest.param(m, e, d, id=m) for m, e, d in _broken_custom_resources()],
)
def test_the_crd_schemas_refuse_a_broken_custom_resource(
    mistake: str, error: str, doc: dict[str, Any]
) -> None:
    """Negative controls: the full schemas are loaded, and applied as strictly as the API server."""
    with pytest.raises((jsonschema.ValidationError, kubernetes_validate.ValidationError)) as e:
        validate(doc)
    assert error in str(e.value)


def test_the_core_validator_rejects_a_misspelled_field() -> None:
    (agent,) = [w for w in workloads("embedded") if w["kind"] == "DaemonSet"]
    broken = _copy(agent)
    broken["spec"]["template"]["spec"]["containers"][0]["securityContext"][
        "readOnlyRootFilesytem"
    ] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(broken)


def test_no_secret_is_applied_so_a_reapply_never_overwrites_a_token() -> None:
    for overlay in OVERLAYS:
        assert not [d for d in documents(overlay) if d["kind"] == "Secret"]
    for path in K8S.rglob("*.yaml"):
        assert "replace-me" not in path.read_text(), path


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_pod_security_restricted_everywhere_but_the_agents_own_namespace(overlay: str) -> None:
    namespaces = {d["metadata"]["name"]: d["metadata"]["labels"] for d in documents(overlay)
                  if d["kind"] == "Namespace"}  # fmt: skip
    assert namespaces[APP]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert namespaces[AGENT_NS]["pod-security.kubernetes.io/enforce"] == "privileged"
    for workload in workloads(overlay):
        name = workload["metadata"]["name"]
        pod = workload["spec"]["template"]["spec"]
        if workload["metadata"]["namespace"] == AGENT_NS:
            assert name == "fleetscope-agent"  # alone there
            continue
        assert workload["metadata"]["namespace"] == APP, name
        # The restricted profile (kubernetes.io/docs/concepts/security/pod-security-standards)
        assert not {"hostPID", "hostIPC", "hostNetwork"} & set(pod), name
        assert all("hostPath" not in v for v in pod.get("volumes", [])), name
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", name
        for container in containers(workload):
            security = {**pod["securityContext"], **container["securityContext"]}
            assert security["runAsNonRoot"] is True and security["runAsUser"] != 0, name
            assert security["allowPrivilegeEscalation"] is False, name
            assert security["capabilities"] == {"drop": ["ALL"]}, name
            assert security["readOnlyRootFilesystem"] is True, name
    (agent,) = [w for w in workloads(overlay) if w["metadata"]["name"] == "fleetscope-agent"]
    security = agent["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    # kubelet.sock and other users' /proc/<pid>/environ are root's (docs/deploy.md)
    assert security["runAsUser"] == 0 and security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"], "add": ["SYS_PTRACE"]}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_component_has_its_own_service_account_and_no_api_access(overlay: str) -> None:
    docs = documents(overlay)
    accounts = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in docs
                if d["kind"] == "ServiceAccount"}  # fmt: skip
    assert all(a["automountServiceAccountToken"] is False for a in accounts.values())
    used: dict[str, set[str]] = {}
    for workload in workloads(overlay):
        pod = workload["spec"]["template"]["spec"]
        account = pod["serviceAccountName"]
        assert (workload["metadata"]["namespace"], account) in accounts, account
        assert pod["automountServiceAccountToken"] is False
        used.setdefault(account, set()).add(workload["metadata"]["name"])
    for account, users in used.items():  # one component each (gateways: one, replicated)
        assert len(users) == 1, (account, users)
    assert not [d for d in docs if d["kind"] in {"Role", "ClusterRole", "RoleBinding",
                                                   "ClusterRoleBinding"}]  # fmt: skip


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_written_path_is_absolute_on_a_declared_writable_volume(overlay: str) -> None:
    for workload in workloads(overlay):
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
                assert not var.startswith("FLEETSCOPE_") or setting, f"{name}: {var}"
                if setting and setting.type == "path" and value:
                    assert PurePosixPath(value).is_absolute(), f"{name}: {var}={value}"
                    written = setting.key in WRITTEN
                    reader = workload["metadata"]["name"] in READERS
                    folders = writable if written and not reader else readable
                    assert any(under(value, f) for f in folders), f"{name}: {var}={value}"
            command = container.get("command", []) + container.get("args", [])
            if "--schedule" in command:  # celery beat's schedule file
                schedule = command[command.index("--schedule") + 1]
                assert any(under(schedule, f) for f in writable), name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_agent_ships_over_tls_to_the_ingest_service_with_certificates_on_volumes(
    overlay: str,
) -> None:
    found = by_kind(overlay)
    agent = env_of(
        found["DaemonSet", "fleetscope-agent"]["spec"]["template"]["spec"]["containers"][0]
    )
    service = found["Service", "fleetscope-ingest"]
    url = re.fullmatch(
        r"https://([^.:]+)\.([^.:]+)\.svc:(\d+)", agent["FLEETSCOPE_AGENT_INGEST_URL"]
    )
    assert url is not None
    assert url.group(1, 2) == (service["metadata"]["name"], service["metadata"]["namespace"])
    assert int(url.group(3)) == service["spec"]["ports"][0]["port"]
    assert agent["FLEETSCOPE_AGENT_TLS_CA_FILE"] == "/etc/fleetscope/ca/ca.crt"
    server = [w for w in workloads(overlay)
              if w["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/component")
              == "ingest"]  # fmt: skip
    (pod,) = [w["spec"]["template"]["spec"] for w in server]
    env = env_of(pod["containers"][0])
    tls_volume = {v["name"]: v for v in pod["volumes"]}["tls"]
    assert tls_volume["secret"]["secretName"] == "fleetscope-ingest-tls"
    assert env["FLEETSCOPE_SERVER_TLS_CERT_FILE"] == "/etc/fleetscope/tls/tls.crt"
    assert env["FLEETSCOPE_SERVER_TLS_KEY_FILE"] == "/etc/fleetscope/tls/tls.key"
    assert "FLEETSCOPE_SERVER_TOKENS" in env  # shared: every gateway accepts every agent's token
    for probe in ("readinessProbe", "livenessProbe"):
        assert pod["containers"][0][probe]["httpGet"]["scheme"] == "HTTPS"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_services_budgets_policies_and_monitors_select_what_exists(overlay: str) -> None:
    docs = documents(overlay)
    pods = {(w["metadata"]["namespace"], w["metadata"]["name"]): w["spec"]["template"]
            for w in workloads(overlay)}  # fmt: skip

    def selected(namespace: str, selector: dict[str, str]) -> list[dict[str, Any]]:
        return [t for (ns, _), t in pods.items()
                if ns == namespace and selector.items() <= t["metadata"]["labels"].items()]  # fmt: skip

    services = [d for d in docs if d["kind"] == "Service"]
    for service in services:
        targets = selected(service["metadata"]["namespace"], service["spec"]["selector"])
        assert len(targets) == 1, service["metadata"]["name"]
        ports = {p["name"] for c in targets[0]["spec"]["containers"] for p in c.get("ports", [])}
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= ports
    for doc in docs:
        if doc["kind"] in {"PodDisruptionBudget", "NetworkPolicy"}:
            key = "selector" if doc["kind"] == "PodDisruptionBudget" else "podSelector"
            labels = doc["spec"][key].get("matchLabels", {})
            assert selected(doc["metadata"]["namespace"], labels), doc["metadata"]["name"]
        if doc["kind"] == "ServiceMonitor":
            labels = doc["spec"]["selector"]["matchLabels"]
            (service,) = [s for s in services
                          if s["metadata"]["namespace"] == doc["metadata"]["namespace"]
                          and labels.items() <= s["metadata"].get("labels", {}).items()]  # fmt: skip
            ports = {p["name"] for p in service["spec"]["ports"]}
            assert {e["port"] for e in doc["spec"]["endpoints"]} <= ports
    for namespace in (APP, AGENT_NS):  # deny by default in both
        (deny,) = [d for d in docs if d["kind"] == "NetworkPolicy"
                   and d["metadata"]["namespace"] == namespace
                   and d["spec"]["podSelector"] == {}]  # fmt: skip
        assert deny["spec"]["policyTypes"] == ["Ingress"] and "ingress" not in deny["spec"]
    singles = {w["metadata"]["name"]: w["spec"] for w in workloads(overlay)}
    if overlay == "embedded":
        assert singles["fleetscope-ingest"]["replicas"] == 1  # one DuckDB writer
    else:
        assert singles["fleetscope-gateway"]["replicas"] >= 2  # stateless, any number
    assert singles["fleetscope-beat"]["replicas"] == 1  # one beat
    assert singles["fleetscope-beat"]["strategy"]["type"] == "Recreate"


def test_the_prometheus_rule_is_the_shipped_rule_file() -> None:
    shipped = yaml.safe_load((ROOT / "deploy" / "prometheus" / "fleetscope-alerts.yml").read_text())
    for overlay in OVERLAYS:
        rule = by_kind(overlay)["PrometheusRule", "fleetscope"]
        assert rule["spec"]["groups"] == shipped["groups"]


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
    extras = {"agent": "agent", "server": "dashboard,fleet"}[image]  # the server runs a gateway
    assert f'pip install --no-cache-dir ".[{extras}]"' in text


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
