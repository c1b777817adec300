"""`fleetscope demo`: a simulated fleet, one agent per host, the server and the dashboard, on one box.

Everything runs as real processes talking real HTTP on loopback into an embedded DuckDB under
`.demo/` (wiped at start so every demo begins the same way). Ctrl-C stops every process, agents
first so that they flush, then the server, then the dashboard; nothing is left behind.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleetscope.settings import Settings


DEMO_TOKEN = "demo-token"
# The closed loop on (analyzers.autoprofile): a stall finding on a job with the SDK attached
# profiles it by itself, within the budget; no periodic sampling in a minutes-long tour.
AUTOPROFILE = {
    "FLEETSCOPE_AUTOPROFILE_ENABLED": "true",
    "FLEETSCOPE_AUTOPROFILE_TICK_S": "10",
    "FLEETSCOPE_AUTOPROFILE_PERIODIC": "false",
}


def register(subparsers: Any) -> None:
    demo = subparsers.add_parser(
        "demo", help="run a simulated fleet, agents, server and dashboard until Ctrl-C"
    )
    demo.add_argument("--hosts", type=int, default=None, help="simulated hosts (8 GPUs each)")
    demo.add_argument("--dir", default=".demo", help="folder for the demo's data and logs")
    demo.add_argument("--interval-s", type=float, default=5.0, help="agent scrape interval")
    demo.add_argument(
        "--duration-s", type=float, default=0.0, help="stop after this long (0: until Ctrl-C)"
    )
    demo.set_defaults(handler=run_demo)


def _bin(name: str) -> str:
    """A console script of this environment, so the demo never picks another install."""
    return str(Path(sys.executable).with_name(name))


def _stop_on_ctrl_c_and_sigterm() -> None:
    """Ctrl-C (and SIGTERM) raise KeyboardInterrupt here, whatever this process inherited:
    CPython leaves SIGINT ignored when it starts ignored, as it does under a non-interactive
    shell's `&`, and the demo would then never stop on Ctrl-C."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, interrupt)


def run_demo(args: argparse.Namespace, settings: Settings) -> int:
    from app.supervise import Supervisor, http_ok, wait_until

    _stop_on_ctrl_c_and_sigterm()
    root = Path(args.dir).resolve()
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    hosts = args.hosts or settings.get_int("simulator.hosts")
    server_port = settings.get_int("server.port")
    dashboard_port = settings.get_int("dashboard.port")
    base_port = settings.get_int("simulator.base_port")
    ingest_url = f"http://127.0.0.1:{server_port}"
    common = {
        "FLEETSCOPE_CORE_DATA_DIR": str(root / "data"),
        "FLEETSCOPE_SERVER_TOKENS": DEMO_TOKEN,
        "FLEETSCOPE_SERVER_PORT": str(server_port),
        "FLEETSCOPE_DASHBOARD_PORT": str(dashboard_port),
        "FLEETSCOPE_DASHBOARD_DEFAULT_WINDOW": "last hour",  # the demo's data is minutes old
        **AUTOPROFILE,
    }
    with Supervisor(log_dir=root / "logs") as supervisor:
        supervisor.start("server", [_bin("fleetscope"), "server"], common)
        wait_until(http_ok(f"{ingest_url}/healthz"), 60, "ingest server", supervisor.check_alive)
        supervisor.start(
            "simulator",
            [
                _bin("fleetscope"), "simulate",
                "--hosts", str(hosts),
                "--base-port", str(base_port),
                "--truth", str(root / "truth.jsonl"),
                "--ingest-url", ingest_url,
                "--token", DEMO_TOKEN,
                # its training processes report steps to each host's agent (sockets below)
                "--sdk-socket", str(root / "sock" / "agent-{index:02d}.sock"),
            ],
            common,
        )  # fmt: skip
        last_exporter = f"http://127.0.0.1:{base_port + hosts - 1}/metrics"
        wait_until(http_ok(last_exporter), 60, "simulated exporters", supervisor.check_alive)
        for index in range(hosts):
            agent_env = {
                **common,
                "FLEETSCOPE_AGENT_DCGM_URL": f"http://127.0.0.1:{base_port + index}/metrics",
                "FLEETSCOPE_AGENT_INGEST_URL": ingest_url,
                "FLEETSCOPE_AGENT_TOKEN": DEMO_TOKEN,
                "FLEETSCOPE_AGENT_INTERVAL_S": str(args.interval_s),
                "FLEETSCOPE_AGENT_SHIP_INTERVAL_S": str(args.interval_s),
                "FLEETSCOPE_AGENT_SPOOL_DIR": str(root / "spool" / f"agent-{index:02d}"),
                "FLEETSCOPE_AGENT_METRICS_PORT": "0",
                "FLEETSCOPE_AGENT_SDK_SOCKET": str(root / "sock" / f"agent-{index:02d}.sock"),
            }
            supervisor.start(f"agent-{index:02d}", [_bin("fleetscope-agent"), "run"], agent_env)
        supervisor.start("dashboard", [_bin("fleetscope"), "dashboard"], common)
        dashboard_url = f"http://127.0.0.1:{dashboard_port}"
        wait_until(
            http_ok(f"{dashboard_url}/_stcore/health"), 90, "dashboard", supervisor.check_alive
        )
        print(f"fleetscope demo: {hosts} hosts x 8 GPUs simulated, ingest at {ingest_url}")
        print(f"fleetscope demo: dashboard at {dashboard_url}  (logs in {root / 'logs'})")
        print("fleetscope demo: press Ctrl-C to stop everything", flush=True)
        started = time.monotonic()
        try:
            while args.duration_s <= 0 or time.monotonic() - started < args.duration_s:
                supervisor.check_alive()
                time.sleep(1.0)
        except KeyboardInterrupt:
            print("\nfleetscope demo: stopping...", flush=True)
    print("fleetscope demo: stopped; no process left running.")
    return 0
