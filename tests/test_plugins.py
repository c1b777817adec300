"""A third party's package extends fleetscope through fleetscope.plugins' entry points, exactly as
the built-ins do: a command, a trace analysis, a trace rule and a server plug-in hooking committed
batches; and the built-ins are found only that way.

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

from fleetscope import plugins

PLUGIN = """
import argparse
import json
from pathlib import Path

HELP = "say hello (a third-party command)"


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

# Written before command cards: no HELP, so --help shows its docstring's first line.
LEGACY = """\"\"\"Wave at the fleet.

More words.\"\"\"


def register(subparsers):
    wave = subparsers.add_parser("wave", help="wave at the fleet")
    wave.set_defaults(handler=lambda args, settings: print("wave") or 0)
"""

ANALYSIS = """
from analyzers.traces.analyses.base import AnalysisResult, analysis

PLUGIN_ORDER = 15  # between the built-ins at 10 and 20


@analysis("acme_count", "Events per rank", None, "HTA has none")
def acme_count(trace, options):
    return AnalysisResult("acme_count")
"""

ENTRY_POINTS = """
[fleetscope.commands]
hello = acme_plugin
wave = acme_legacy
broken = acme_nowhere

[fleetscope.trace_analyses]
acme_count = acme_analysis

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
from warehouse.ingest.runtime import Server

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
from analyzers.traces.findings import trace_rules
print(json.dumps(list(trace_rules())))
"""

ANALYSES_PROBE = """
import json
from analyzers.traces.analyses import load_registry
print(json.dumps(list(load_registry())))
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    site = tmp_path / "site"
    dist = site / "acme_fleetscope-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-fleetscope\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(ENTRY_POINTS)
    (site / "acme_plugin.py").write_text(PLUGIN)
    (site / "acme_legacy.py").write_text(LEGACY)
    (site / "acme_analysis.py").write_text(ANALYSIS)
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH", "")]))
    return {**os.environ, "PYTHONPATH": path}


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=240
    )


def test_a_third_party_command_runs_like_a_built_in(env: dict[str, str]) -> None:
    result = _run(env, "-m", "app.cli", "hello", "--name", "ada")
    assert (result.returncode, result.stdout) == (0, "hello ada\n")


def test_top_level_help_lists_third_party_commands_from_their_cards(
    env: dict[str, str],
) -> None:
    result = _run(env, "-m", "app.cli", "--help")
    assert result.returncode == 0, result.stderr
    assert "    hello          say hello (a third-party command)\n" in result.stdout
    assert "    wave           Wave at the fleet.\n" in result.stdout
    assert _run(env, "-m", "app.cli", "wave").stdout == "wave\n"


def test_a_broken_command_plugin_stops_only_itself(env: dict[str, str]) -> None:
    listed = _run({**env, "COLUMNS": "200"}, "-m", "app.cli", "--help").stdout
    assert "    broken         (broken plug-in: command broken: cannot load acme_nowhere:" in listed
    result = _run(env, "-m", "app.cli", "broken")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("fleetscope: error: command broken: cannot load acme_nowhere")


def test_a_third_party_trace_rule_joins_the_built_in_rules(env: dict[str, str]) -> None:
    result = _run(env, "-c", RULES_PROBE)
    assert json.loads(result.stdout) == [f"T{n}" for n in range(1, 14)] + ["acme_slow"]


def test_a_third_party_analysis_takes_its_declared_place_in_the_report(
    env: dict[str, str],
) -> None:
    result = _run(env, "-c", ANALYSES_PROBE)
    assert result.returncode == 0, result.stderr
    names = json.loads(result.stdout)
    assert names[:3] == ["temporal_breakdown", "acme_count", "idle_time"]
    assert names[-6:] == [
        "whatif", "stragglers", "kernel_sequences", "aten_op_kernels", "counters", "cupti_counters"
    ]  # fmt: skip
    assert len(names) == 25


def test_a_server_plugin_sees_every_committed_batch(env: dict[str, str], tmp_path: Path) -> None:
    result = _run(env, "-c", SERVER_PROBE, str(tmp_path / "data"))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"status": 202, "commits": ['{"gpu_samples": 80}']}


def test_server_plugins_default_to_every_installed_one_in_plugin_order() -> None:
    from fleetscope.settings import SETTINGS
    from warehouse.ingest.runtime import load_plugins

    assert next(s.default for s in SETTINGS if s.key == "server.plugins") == "*"
    modules = [setup.__module__ for setup in load_plugins("*")]
    assert modules == [
        "analyzers.run.embedded",
        "analyzers.traces.service",
        "analyzers.reports.scheduled",
        "analyzers.prometheus_export",
        "analyzers.read_api",
        "analyzers.notify",
        "analyzers.autoprofile.plugin",
    ]
    assert sorted(modules) == sorted(plugins.registered(plugins.SERVER))
    # An explicit list runs in plug-in order too.
    pair = "analyzers.autoprofile.plugin,analyzers.traces.service"
    assert [s.__module__ for s in load_plugins(pair)] == [modules[1], modules[-1]]
    # The order the server always had; the closed loop reads what the trace service stored.
    assert modules[-1] == "analyzers.autoprofile.plugin"
    left_out = [s.__module__ for s in load_plugins("*, -analyzers.autoprofile.plugin")]
    assert left_out == modules[:-1]
    assert load_plugins("") == []


def test_server_plugins_take_entry_point_names_only(tmp_path: Path) -> None:
    """A module with `setup` that no package registers is refused by name; installed as an entry
    point (a real distribution's metadata on the path), the same name loads."""
    from fleetscope.errors import ConfigError
    from tests.plugin_dist import TEST_SERVER_PLUGINS, installed
    from warehouse.ingest.runtime import load_plugins

    name = "tests.fleet.counted_analysis"
    with pytest.raises(ConfigError, match=r"no installed server plug-in is named 'tests\.fleet"):
        load_plugins(name)
    with installed(tmp_path, {plugins.SERVER: TEST_SERVER_PLUGINS}):
        assert [s.__module__ for s in load_plugins(name)] == [name]
    with pytest.raises(ConfigError):
        load_plugins(name)  # gone with its distribution


def test_rules_load_through_the_one_loader(tmp_path: Path) -> None:
    """analyzers.base.discover reads fleetscope.plugins: a rule name two packages claim is the
    loader's clash error, not a second code path's."""
    from analyzers.base import discover
    from fleetscope.errors import ConfigError
    from tests.plugin_dist import installed

    assert "zero_util" in discover()
    other = {"zero_util": "analyzers.rules.r02_low_util:LowUtilization"}
    clash = "2 installed packages claim the name 'zero_util'"
    with installed(tmp_path, {plugins.RULES: other}), pytest.raises(ConfigError, match=clash):
        discover()


def test_a_selection_adds_all_names_and_leaves_out() -> None:
    installed = ["a", "b", "c"]
    assert plugins.select_names("*", installed) == ["a", "b", "c"]
    assert plugins.select_names("-b,*", installed) == ["a", "c"]
    assert plugins.select_names("c, mod.x ,a,c", installed) == ["c", "mod.x", "a"]
    assert plugins.select_names(" , ", installed) == []


def test_a_plugin_without_an_order_comes_after_the_built_ins() -> None:
    built_in = type("M", (), {"PLUGIN_ORDER": 170})()
    loaded = [("zz_last_built_in", built_in), ("aa_third_party", object()), ("T10", 1), ("T2", 2)]
    assert [n for n, _ in plugins.sort_loaded(loaded)] == [
        "zz_last_built_in",
        "T2",
        "T10",
        "aa_third_party",
    ]


def test_stale_metadata_says_reinstall_instead_of_finding_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from app.cli import main
    from fleetscope.errors import ConfigError

    monkeypatch.setattr(plugins, "registered", lambda group: {})
    with pytest.raises(ConfigError, match="reinstall"):
        plugins.load_group(plugins.TRACE_ANALYSES)
    assert main(["--help"]) == 2


def test_a_name_two_packages_claim_fails_with_both_named_instead_of_one_winning(
    env: dict[str, str], tmp_path: Path
) -> None:
    rival = tmp_path / "rival"
    dist = rival / "rival_fleetscope-0.2.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: rival-fleetscope\nVersion: 0.2\n")
    (dist / "entry_points.txt").write_text(
        "[fleetscope.commands]\nhello = rival_hello\n\n"
        "[fleetscope.trace_rules]\nT3 = rival_hello:rule\n"
    )
    (rival / "rival_hello.py").write_text(PLUGIN.replace("hello {args.name}", "rival {args.name}"))
    env = {**env, "PYTHONPATH": os.pathsep.join([str(rival), env["PYTHONPATH"]])}

    ran = _run(env, "-m", "app.cli", "hello")
    assert (ran.returncode, ran.stdout) == (2, "")
    assert ran.stderr.startswith(
        "fleetscope: error: command hello: cannot load rival_hello | acme_plugin: "
        "2 installed packages claim the name 'hello' in fleetscope.commands "
        "(rival_hello and acme_plugin); uninstall all but one"
    )
    listed = _run({**env, "COLUMNS": "200"}, "-m", "app.cli", "--help").stdout
    assert "    hello          (broken plug-in: command hello: cannot load rival_hello" in listed
    assert _run(env, "-m", "app.cli", "wave").stdout == "wave\n"  # the others still run

    rules = _run(env, "-c", RULES_PROBE)
    assert rules.returncode != 0
    assert (
        "2 installed packages claim the name 'T3' in fleetscope.trace_rules "
        "(analyzers.traces.findings:t3_queue and rival_hello:rule); uninstall all but one"
        in rules.stderr
    )


def test_a_server_plugin_selection_that_cannot_load_fails_before_the_server_opens_anything(
    tmp_path: Path,
) -> None:
    """The plug-ins are resolved first: a refused selection leaves no DuckDB file written and no
    port held (it once failed after binding, leaving the socket open)."""
    import socket

    from fleetscope.errors import ConfigError
    from fleetscope.settings import load_settings
    from warehouse.ingest.runtime import Server

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = load_settings(env={}).with_overrides(
        core__data_dir=str(tmp_path / "data"), server__port=port, server__plugins="no_such.plugin"
    )
    with pytest.raises(ConfigError, match=r"no_such\.plugin"):
        Server(settings)
    assert not list(tmp_path.rglob("*.duckdb"))
    with socket.socket() as again:
        again.bind(("127.0.0.1", port))  # free: nothing kept it
