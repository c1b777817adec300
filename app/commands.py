"""The one registry of `fleetscope` commands: a command is one module plus one line here.

Each line names the command, the module whose `register(subparsers)` adds it (a module may add
several: `warehouse.cli` adds server, token, warehouse and import) and the one-line help that
`fleetscope --help` prints without importing the module, so the top-level help loads no stage.
tests/test_command_registry.py checks that every line's help is the help its module registers.
A handler is `(args, settings) -> exit code`; heavy imports (DuckDB, Streamlit, Celery, torch)
stay inside handlers, so a command's own `--help` stays fast too.
"""

from __future__ import annotations

from typing import NamedTuple


class Command(NamedTuple):
    name: str
    module: str
    help: str


COMMANDS: tuple[Command, ...] = (
    Command("config", "app.config_cli", "inspect settings"),
    Command("demo", "app.demo", "run a simulated fleet, agents, server and dashboard until Ctrl-C"),
    Command(
        "profile", "app.profile_cli", "profile a running job on demand and print its trace findings"
    ),
    Command(
        "simulate",
        "simulator.cli",
        "serve simulated dcgm-exporter endpoints, or generate a simulated fleet's tables",
    ),
    Command("server", "warehouse.cli", "run the ingest server (writer, HTTP, upkeep)"),
    Command("token", "warehouse.cli", "manage agent bearer tokens"),
    Command("warehouse", "warehouse.cli", "telemetry store maintenance and queries"),
    Command("import", "warehouse.cli", "backfill telemetry from another system"),
    Command("analyzers", "analyzers.cli", "List registered analyzers, rules, thresholds."),
    Command("analyze", "analyzers.cli", "Run the analyzer windows that are due, here."),
    Command("backfill", "analyzers.cli", "Re-run whole analysis buckets of a past range."),
    Command("opportunities", "analyzers.cli", "Recoverable GPU-hours, ranked fleet-wide."),
    Command("job", "analyzers.cli", "One job's efficiency summary and findings."),
    Command("findings", "analyzers.cli", "List findings; acknowledge or suppress them."),
    Command(
        "eval", "app.eval_cli", "Analyzer precision/recall on the simulated and the field fleet."
    ),
    Command("trace", "analyzers.traces.cli", "PyTorch profiler (Kineto) trace analysis"),
    Command("plan", "analyzers.sharing.cli", "Capacity plans from the fleet's telemetry"),
    Command(
        "quantiles",
        "analyzers.quantiles.cli",
        "Percentiles of a metric by cluster, team, job or host, from sketches.",
    ),
    Command("report", "analyzers.reports.cli", "Efficiency reports (weekly HTML, PDF, Markdown)."),
    Command(
        "dashboard",
        "dashboard.cli",
        "Serve the Streamlit dashboard (fleet, jobs, traces, hosts).",
    ),
)
