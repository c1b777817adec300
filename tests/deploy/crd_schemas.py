"""The Prometheus Operator's CRD schemas (tests/data/crds, verbatim from a release) as a JSON
Schema validator that refuses what a Kubernetes API server refuses under `kubectl apply`'s strict
field validation, offline.

A CRD's openAPIV3Schema is a Kubernetes *structural* schema, not plain JSON Schema. The API
server (k8s.io/apiextensions-apiserver, "Specifying a structural schema" in the CRD docs) adds:
- unknown fields are errors under strict field validation (kubectl's default since 1.27), unless a
  node says `x-kubernetes-preserve-unknown-fields`; JSON Schema allows them unless told
  `additionalProperties: false`;
- `metadata` is ObjectMeta whatever the CRD says (the CRD says only `type: object`);
- `x-kubernetes-int-or-string`: an integer or a string; `nullable`: null is allowed too;
- `x-kubernetes-list-type: set`: no duplicates; `map` with `x-kubernetes-list-map-keys`: no two
  items with the same keys.
The stored files stay the operator's text; these rules are applied when loading.

Regenerate the stored schemas from a prometheus-operator checkout (its git directory) at a tag:
    python -m tests.deploy.crd_schemas /path/to/prometheus-operator.git v0.93.0
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import yaml

CRDS = Path(__file__).resolve().parents[1] / "data" / "crds"
# (apiVersion, kind) -> the CRD file of prometheus-operator's example/prometheus-operator-crd/
OPERATOR_CRDS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "monitoring.coreos.com_servicemonitors",
    ("monitoring.coreos.com/v1", "PrometheusRule"): "monitoring.coreos.com_prometheusrules",
}


def stored_path(api_version: str, kind: str) -> Path:
    version = api_version.split("/")[1]
    return CRDS / f"{OPERATOR_CRDS[api_version, kind]}.{version}.json"


def served(api_version: str, kind: str) -> bool:
    return (api_version, kind) in OPERATOR_CRDS


def _strict(node: Any) -> Any:
    """The structural schema rewritten as the JSON Schema the API server effectively applies."""
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _strict(value) for key, value in node.items()}
    closed = "properties" in out and "additionalProperties" not in out
    if closed and not out.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    if out.pop("x-kubernetes-int-or-string", False):
        out["type"] = ["integer", "string"]
    if out.pop("nullable", False) and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    if out.get("x-kubernetes-list-type") == "set":
        out["uniqueItems"] = True
    return out


def _unique_map_keys(
    validator: Any, keys: list[str], instance: Any, schema: dict[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    if schema.get("x-kubernetes-list-type") != "map" or not isinstance(instance, list):
        return
    seen: set[tuple[Any, ...]] = set()
    for item in instance:
        key = tuple(json.dumps(item.get(k), sort_keys=True) for k in keys)
        if key in seen:
            yield jsonschema.ValidationError(f"duplicate entry for map keys {keys}: {key}")
        seen.add(key)


StructuralValidator = jsonschema.validators.extend(
    jsonschema.Draft7Validator, {"x-kubernetes-list-map-keys": _unique_map_keys}
)


def validator(api_version: str, kind: str) -> Any:
    """A validator for the object minus its metadata (metadata is ObjectMeta: check it apart)."""
    schema = _strict(json.loads(stored_path(api_version, kind).read_text()))
    schema["properties"]["metadata"] = {"type": "object"}
    return StructuralValidator(schema)


def regenerate(git_dir: Path, tag: str) -> None:
    for (api_version, kind), name in OPERATOR_CRDS.items():
        path = f"{tag}:example/prometheus-operator-crd/{name}.yaml"
        text = subprocess.run(
            ["git", "--git-dir", str(git_dir), "show", path],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        crd = yaml.safe_load(text)
        assert crd["spec"]["names"]["kind"] == kind, path
        (version,) = [v for v in crd["spec"]["versions"] if v["name"] == api_version.split("/")[1]]
        out = stored_path(api_version, kind)
        out.write_text(json.dumps(version["schema"]["openAPIV3Schema"], indent=1) + "\n")


if __name__ == "__main__":
    regenerate(Path(sys.argv[1]), sys.argv[2])
