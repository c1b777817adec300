"""A third party's package extends fleetscope through fleetscope.plugins' entry points, exactly as
the built-ins do: a command, a trace rule and a server plug-in hooking committed batches.

The package is real as far as Python packaging goes: a module and a `.dist-info` folder with its
`entry_points.txt` on the path of a fresh interpreter, which is all an installed wheel adds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PLUGIN = """
import argparse
import json
from pathlib import Path


def register(subparsers):
    hello = subparsers.add_parser("hello", help="say hello (a third-party command)")
    hello.add_argument("--name", default="fleet")
    hello.set_defaults(handler=lambda args, settings: print(f"hello {args.name}") or 0)


def setup(server):
    out = Path(server.settings.core.data_dir) / "acme-commits.jsonl"

    def committed(srv, commit):
        rows = {name: table.num_rows for name, table in commit.tables.items()}
        with out.open("a") as handle:
            handle.write(json.dumps(rows) + "\\n")

    server.on_batch_committed.append(committed)


def slow_everything(frame, results, options, emit):
    return iter(())
"""

ENTRY_POINTS = """
[fleetscope.commands]
hello = acme_plugin

[fleetscope.server]
acme = acme_plugin:setup

[fleetscope.trace_rules]
acme_slow = acme_plugin:slow_everything
"""

SERVER_PROBE = """
import json, sys, time
from pathlib import Path
from fleetscope.settings import load_settings
from simulator.maker.batches import gpu_batch
from simulator.wire import TEST_TOKEN, post_batch
from warehouse.runtime import Server

data = Path(sys.argv[1])
settings = load_settings(env={}).with_overrides(
    core__data_dir=str(data), server__port=0, server__tokens=TEST_TOKEN,
    warehouse__flush_interval_s=0.02, warehouse__maintenance_interval_s=3600.0,
    server__plugins="acme",
)
server = Server(settings)
server.start()
try:
    answer = post_batch(server.url, "gpu_samples", gpu_batch("gpu-01"), token=TEST_TOKEN)
    out = data / "acme-commits.jsonl"
    deadline = time.monotonic() + 60
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    print(json.dumps({"status": answer.status, "commits": out.read_text().splitlines()}))
finally:
    server.stop()
"""

RULES_PROBE = """
import json
from fleetscope import plugins
print(json.dumps(sorted(plugins.registered(plugins.TRACE_RULES))))
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    site = tmp_path / "site"
    dist = site / "acme_fleetscope-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-fleetscope\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(ENTRY_POINTS)
    (site / "acme_plugin.py").write_text(PLUGIN)
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH", "")]))
    return {**os.environ, "PYTHONPATH": path}


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=240
    )


def test_a_third_party_command_runs_like_a_built_in(env: dict[str, str]) -> None:
    result = _run(env, "-m", "app.cli", "hello", "--name", "ada")
    assert (result.returncode, result.stdout) == (0, "hello ada\n")


def test_a_third_party_trace_rule_joins_the_built_in_rules(env: dict[str, str]) -> None:
    result = _run(env, "-c", RULES_PROBE)
    assert json.loads(result.stdout) == ["acme_slow"]


def test_a_server_plugin_sees_every_committed_batch(env: dict[str, str], tmp_path: Path) -> None:
    result = _run(env, "-c", SERVER_PROBE, str(tmp_path / "data"))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"status": 202, "commits": ['{"gpu_samples": 80}']}
