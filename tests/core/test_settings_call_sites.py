"""Packages read settings typed (`settings.agent.dcgm_url`), never by a literal key.

A key written as a string (`get_str("agent.dcgm_url")`) fails only when that line runs; the typed
view (fleetscope/settings/typed.py, generated from the settings table) fails `mypy` instead. This
scan of every package module's syntax tree keeps the by-key reads from coming back: a call to the
retired getters, or any call whose first argument is a literal settings key, fails the test.
Reading by key stays for generic use, where the key is data (`config show`, docgen):
`settings.raw(key)` with a variable.
"""

from __future__ import annotations

import ast
from pathlib import Path

from fleetscope.settings import SETTINGS

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (
    "fleetscope",
    "app",
    "collector",
    "simulator",
    "warehouse",
    "analyzers",
    "dashboard",
    "bench",
)
# The settings package itself names keys: the table's rows and the loader.
EXEMPT = ROOT / "fleetscope" / "settings"
RETIRED = {"get_str", "get_int", "get_float", "get_bool", "get_path", "data_path"}
KEYS = {s.key for s in SETTINGS}


def literal_key_reads(source: str) -> list[tuple[int, str]]:
    """(line, call) for each by-key settings read in `source`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else ""
        first = node.args[0] if node.args else None
        literal = isinstance(first, ast.Constant) and first.value in KEYS
        if name in RETIRED or literal:
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_the_scan_finds_by_key_reads() -> None:
    source = 'a = s.get_str("agent.dcgm_url")\nb = s.raw("core.data_dir")\nc = s.agent.host\n'
    assert [line for line, _ in literal_key_reads(source)] == [1, 2]


def test_no_package_reads_a_setting_by_literal_key() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {call}"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if EXEMPT not in path.parents
        for line, call in literal_key_reads(path.read_text())
    ]
    assert offenders == [], "read `settings.<section>.<name>` instead:\n" + "\n".join(offenders)
