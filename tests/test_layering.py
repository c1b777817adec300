"""Dependencies point one way: each package may load only what docs/architecture.md allows.

Each package's modules are imported in a fresh interpreter and the loaded modules inspected, so a
forbidden import anywhere in the import graph (not only at the top of a file) fails the test. The
static graph (every import statement, in functions too, `if TYPE_CHECKING:` blocks aside) adds
the imports a handler makes only when it runs, and the plug-ins loaded at run time (entry points,
fleetscope.plugins: each belongs to its registering package and depends on the host that loads it;
`server.plugins` names outside them): it must go the same way and hold no cycle.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

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


ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("fleetscope", "app", "collector", "simulator", "warehouse", "analyzers", "dashboard")
# Who may import whom, among the project's own packages (the app may import every stage).
MAY_NOT_IMPORT: dict[str, set[str]] = {
    package: {p for p in FORBIDDEN.get(package, set()) if p in PACKAGES} for package in PACKAGES
}


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _static_edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        type_only = {
            id(sub)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for sub in ast.walk(node)
        }
        targets: set[str | None] = set()
        for node in ast.walk(tree):
            if id(node) in type_only:
                continue
            if isinstance(node, ast.Import):
                targets |= {_resolve(alias.name, modules) for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets |= {_resolve(f"{node.module}.{a.name}", modules) for a in node.names}
        # A submodule importing its own package (its parent runs first anyway) is no cycle.
        edges[name] = {t for t in targets if t and t != name and not name.startswith(t + ".")}
    return edges


# Where each plug-in group is loaded (its host). A plug-in hooks into its host, so it depends on
# it, never the reverse: the host reaches it only through fleetscope.plugins (entry points).
HOSTS = {
    "fleetscope.analyzers": "analyzers",
    "fleetscope.trace_analyses": "analyzers",
    "fleetscope.trace_rules": "analyzers",
    "fleetscope.commands": "app",
    "fleetscope.server": "warehouse",
}


def _runtime_edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Modules loaded at run time: entry points as an edge from the registering package to the
    module it registers plus one from the plug-in to the host it hooks into, and the modules
    `server.plugins` names outside the entry points as the warehouse's own imports."""
    from fleetscope import plugins
    from fleetscope.settings import SETTINGS

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    groups: dict[str, dict[str, str]] = pyproject["project"]["entry-points"]
    declared = {plugins.RULES, plugins.TRACE_ANALYSES, plugins.TRACE_RULES}
    assert set(groups) == set(HOSTS) == declared | {plugins.COMMANDS, plugins.SERVER}
    edges: dict[str, set[str]] = {}
    for group, entries in groups.items():
        for target in entries.values():
            module = target.split(":")[0]
            edges.setdefault(module.split(".")[0], set()).add(module)
            if module.split(".")[0] != HOSTS[group]:
                edges.setdefault(module, set()).add(HOSTS[group])
    default = next(s.default for s in SETTINGS if s.key == "server.plugins")
    edges["warehouse.ingest.runtime"] = {
        name
        for name in plugins.select_names(str(default), [])
        if name not in groups["fleetscope.server"]
    }
    for source, targets in edges.items():
        for target in targets:
            assert _resolve(target, modules) == target, f"{source} loads missing {target}"
    return edges


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = _static_edges(modules)
    for source, targets in _runtime_edges(modules).items():
        graph.setdefault(source, set()).update(targets)
    return graph


def test_every_import_and_runtime_load_points_the_allowed_way() -> None:
    wrong = sorted(
        f"{source} -> {target}"
        for source, targets in _graph().items()
        for target in targets
        if target.split(".")[0] in MAY_NOT_IMPORT[source.split(".")[0]]
    )
    assert wrong == []


def test_no_import_cycles() -> None:
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in list(graph):
        if node not in index:
            visit(node)
    assert cycles == []


MAX_MODULE_LINES = 500  # issue 14: a module a newcomer can read in one sitting


def test_no_module_is_over_500_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_the_warehouse_calls_hooks_and_names_no_analyzer() -> None:
    """No string in the warehouse's code (docstrings aside) names an analyzers module: a plug-in
    is found through its entry point, never loaded by a name the warehouse spells."""
    modules = _modules()
    named: list[str] = []
    for name, path in modules.items():
        if name.split(".")[0] != "warehouse":
            continue
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if id(node) in docstrings:
                    continue
                for word in re.findall(r"\banalyzers(?:\.\w+)+", node.value):
                    if _resolve(word, modules) not in (None, "analyzers"):
                        named.append(f"{name}: {word}")
    assert named == []
