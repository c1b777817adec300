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


def test_a_trace_analysis_loads_no_settings_or_logging(tmp_path: Path) -> None:
    """The command reads no setting, so it loads neither the settings loader nor logging."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    run = _trace_analysis("'--hta-compatible', " + repr(str(DATA / "hta_ns_resolution_rank0")))
    loaded = _modules_after(run, env)
    assert "analyzers.traces.analyses.whatif" in loaded
    assert not {"fleetscope.settings", "logging"} & loaded


def _trace_analysis(words: str) -> str:
    """A script that runs `fleetscope trace analyze` with `words` (Python literals) in process,
    its output kept in `out`."""
    return (
        "import contextlib, io\n"
        "from app.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        f"    assert main(['trace', 'analyze', {words}]) == 0"
    )


def test_an_install_without_the_c_extension_says_how_to_build_it() -> None:
    """The extension is optional in pyproject.toml (the agent image has no compiler), so an install
    on a box without gcc goes on without it; the trace engine then says what to install."""
    probe = (
        "import sys\n"
        "sys.modules['analyzers.traces._kineto_columns'] = None  # as if never built\n"
        "import analyzers.traces.api\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert run.returncode == 1
    assert (
        "ImportError: analyzers.traces needs its C extension, built when fleetscope is installed: "
        "install a C compiler and the Python headers (Debian: gcc python3-dev), then reinstall "
        "fleetscope"
    ) in run.stderr
