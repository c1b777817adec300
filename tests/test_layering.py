"""Dependencies point one way: each package may load only what docs/architecture.md allows.

Each package's modules are imported in a fresh interpreter and the loaded modules inspected, so a
forbidden import anywhere in the import graph (not only at the top of a file) fails the test.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

FORBIDDEN: dict[str, set[str]] = {
    "fleetscope": {
        "duckdb",
        "streamlit",
        "celery",
        "app",
        "collector",
        "simulator",
        "warehouse",
        "analyzers",
        "dashboard",
    },
    "collector": {
        "duckdb",
        "streamlit",
        "celery",
        "sqlalchemy",
        "app",
        "simulator",
        "warehouse",
        "analyzers",
        "dashboard",
    },
    "warehouse": {"streamlit", "app", "collector", "simulator", "analyzers", "dashboard"},
    "analyzers": {"streamlit", "app", "collector", "simulator", "dashboard"},
    "dashboard": {"app", "collector", "simulator"},
    "simulator": {"streamlit", "celery", "app", "analyzers", "dashboard"},
}

PROBE = """
import importlib, json, pkgutil, sys
package = importlib.import_module(sys.argv[1])
for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
    if info.name.endswith(("__main__", ".app")) or ".pages" in info.name:
        continue
    importlib.import_module(info.name)
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_loads_nothing_it_must_not(package: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, package], capture_output=True, text=True, check=True
    )
    loaded = set(json.loads(result.stdout))
    assert loaded & FORBIDDEN[package] == set()
