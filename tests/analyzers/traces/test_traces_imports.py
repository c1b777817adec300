"""`fleetscope trace` pays only for what it runs: registering the command imports neither numpy
nor the analyses, and `fleetscope trace ...` builds no other command's parser (issue 19: start-up
was a third of the whole command on a 1 MB trace). Checked in a fresh interpreter, whose
`sys.modules` is the evidence."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.analyzers.traces.trace_paths import DATA


def _modules_after(code: str, env: dict[str, str] | None = None) -> set[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env
    ).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def test_registering_the_trace_command_imports_no_numpy_and_no_analysis() -> None:
    loaded = _modules_after("import analyzers.traces.cli")
    assert "numpy" not in loaded
    assert not {m for m in loaded if m.startswith("analyzers.traces.analyses")}


def test_importing_the_package_loads_none_of_its_modules() -> None:
    loaded = _modules_after("import analyzers.traces")
    assert "numpy" not in loaded
    assert not {m for m in loaded if m.startswith("analyzers.traces.")}


def test_a_trace_command_builds_only_its_own_parser() -> None:
    trace = DATA / "hta_amd_mi250_minitoy"
    loaded = _modules_after(
        "import contextlib, io\n"
        "from app.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['trace', 'analyze', '--hta-compatible', {str(trace)!r}]) == 0"
    )
    others = {"warehouse.cli", "dashboard.cli", "analyzers.cli", "app.demo"}
    assert not others & loaded
    assert "analyzers.traces.cli" in loaded


def test_a_trace_analysis_loads_no_settings_logging_or_metadata_scan(tmp_path: Path) -> None:
    """What the command never used cost ~60 ms a run: the settings loader and logging (it reads
    no setting) and importlib.metadata's scan of every distribution (the entry points come from
    fleetscope.entry_point_cache once warm)."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    run = _trace_analysis("'--hta-compatible', " + repr(str(DATA / "hta_ns_resolution_rank0")))
    _modules_after(run, env)  # fills the entry-point cache
    loaded = _modules_after(run, env)
    assert "analyzers.traces.analyses.whatif" in loaded
    assert not {"fleetscope.settings", "logging", "importlib.metadata"} & loaded


def test_a_trace_analysis_loads_no_openssl(tmp_path: Path) -> None:
    """Finding ids are SHA-256 by CPython's own implementation: hashlib's import loads OpenSSL,
    ~3 ms of the command (issue 19), for digests of a few dozen bytes."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    run = _trace_analysis(repr(str(DATA / "hta_ns_resolution_rank0")) + ", '--format', 'json'")
    run += "\nassert '\"finding_id\"' in out.getvalue()"
    loaded = _modules_after(run, env)
    assert not {"hashlib", "_hashlib"} & loaded


def _trace_analysis(words: str) -> str:
    """A script that runs `fleetscope trace analyze` with `words` (Python literals) in process,
    its output kept in `out`."""
    return (
        "import contextlib, io\n"
        "from app.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        f"    assert main(['trace', 'analyze', {words}]) == 0"
    )
