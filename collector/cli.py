"""`fleetscope-agent`: the per-host collector's command line (run, once, check).

The edge where errors become messages and exit codes: a FleetscopeError prints one line naming
what is wrong (a parse error names the page's line) and exits with the error's exit code, never a
traceback. Heavy or optional imports (pynvml) happen inside handlers.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from fleetscope import __version__
from fleetscope.edge import run
from fleetscope.settings import Settings

Handler = Callable[[argparse.Namespace, Settings], int]


def _settings_for(args: argparse.Namespace, settings: Settings) -> Settings:
    overrides: dict[str, Any] = {}
    if getattr(args, "dcgm_url", None) is not None:
        overrides["agent__dcgm_url"] = args.dcgm_url
    if getattr(args, "host", None):
        overrides["agent__host"] = args.host
    return settings.with_overrides(**overrides) if overrides else settings


def _json_row(row: dict[str, object]) -> str:
    """The row in the warehouse's column order, every column present; ts as ISO 8601 UTC."""
    from fleetscope.contract import GPU_SAMPLES

    out = {name: row.get(name) for name in GPU_SAMPLES.names}
    ts = out.get("ts")
    if isinstance(ts, int):
        out["ts"] = datetime.fromtimestamp(ts / 1000, tz=UTC).isoformat(timespec="milliseconds")
    return json.dumps(out, allow_nan=False, separators=(",", ":"))


def cmd_once(args: argparse.Namespace, settings: Settings) -> int:
    """Scrape once and print one JSON object per GPU sample (canonical warehouse columns)."""
    from collector.attribution import build_resolver
    from collector.sources.dcgm import DcgmSource

    settings = _settings_for(args, settings)
    url = settings.agent.dcgm_url
    ts_ms = int(datetime.now(tz=UTC).timestamp() * 1000)
    source: Any
    if url:
        source = DcgmSource(
            url,
            cluster=settings.agent.cluster,
            host=settings.agent.host or None,
            timeout_s=settings.agent.scrape_timeout_s,
        )
        pid_gpus = None
    else:
        import pynvml

        from collector.sources.nvml import NvmlSource

        source = NvmlSource(pynvml, cluster=settings.agent.cluster)
        pid_gpus = source.pid_gpus
    readings = source.read(ts_ms)
    build_resolver(settings, pid_gpus=pid_gpus).resolve(readings)
    for reading in readings:
        print(_json_row(reading.row))
    return 0


def cmd_check(args: argparse.Namespace, settings: Settings) -> int:
    from collector.check import run_checks

    settings = _settings_for(args, settings)
    report = run_checks(settings)
    print(report.text())
    return 0 if report.ok else 1


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    from collector.agent import build_agent
    from collector.metrics import MetricsServer, freshness_check

    settings = _settings_for(args, settings)
    agent = build_agent(settings)
    if settings.agent.sdk_socket:
        from collector.sdk_wiring import attach_sdk

        attach_sdk(agent, settings)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server = None
    port = settings.agent.metrics_port
    if port:
        health = freshness_check(lambda: agent.last_ok_scrape, 3 * agent.interval_s + 5)
        server = MetricsServer(agent.metrics, health, port)
        server.start()
    logging.getLogger(__name__).info(
        "agent started: interval %.1fs, ingest %s, spool %s, SDK socket %s",
        agent.interval_s,
        settings.agent.ingest_url,
        settings.agent.spool_dir,
        settings.agent.sdk_socket or "off",
    )
    try:
        agent.run(stop)
    finally:
        if server is not None:
            server.close()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fleetscope-agent",
        description="Per-host collector: scrapes dcgm-exporter (or NVML) and host metrics, "
        "attributes GPUs to jobs, ships batches to fleetscope ingest.",
    )
    parser.add_argument("--version", action="version", version=f"fleetscope-agent {__version__}")
    parser.add_argument(
        "--config", help="TOML settings file (default: $FLEETSCOPE_CONFIG or ./fleetscope.toml)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    once = sub.add_parser("once", help="scrape once and print the normalized GPU samples")
    once.add_argument("--dcgm-url", help="dcgm-exporter /metrics URL (default: agent.dcgm_url)")
    once.add_argument("--host", help="host name to report (default: agent.host)")
    once.add_argument("--format", choices=["json"], default="json", help="output format")
    once.set_defaults(handler=cmd_once)
    check = sub.add_parser(
        "check", help="diagnose the exporter, ingest reachability and token, attribution sources"
    )
    check.add_argument("--dcgm-url", help="dcgm-exporter /metrics URL (default: agent.dcgm_url)")
    check.set_defaults(handler=cmd_check)
    run = sub.add_parser("run", help="run the agent until SIGTERM/SIGINT")
    run.add_argument("--host", help="host name to report (default: agent.host)")
    run.set_defaults(handler=cmd_run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run(argv, build_parser())


if __name__ == "__main__":
    sys.exit(main())
