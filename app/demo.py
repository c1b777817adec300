"""`fleetscope demo`: a simulated fleet, one agent per host, the server and the dashboard, on one box.

Everything runs as real processes talking real HTTP on loopback into an embedded DuckDB under
`.demo/` (wiped at start so every demo begins the same way). Ctrl-C stops every process, agents
first so that they flush, then the server, then the dashboard; nothing is left behind.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import signal
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app import demo_discovery
from fleetscope.tokens import new_token

if TYPE_CHECKING:
    from app.supervise import Supervisor
    from fleetscope.settings import Settings

# The real PyTorch training process's job: it runs on CPU; the simulator shows it on the last GPU
# of host 0 (`simulate --attach-job`), so its Job page has kWh, money and MFU, on a simulated GPU.
TORCH_JOB = "demo/cpu-trainer"
TORCH_JOB_NAME = "cpu-trainer (a CPU process shown on a simulated GPU)"
# A simulated job that is running whenever the demo starts, whatever simulator.seed draws, in a
# scenario whose rules fire on minutes of live data: its loader waits 40 % of each step, so P1
# (and P3) judge it from its first 30 reported steps (~1.5 s each), well within the minute the
# tour promises; the seed's other jobs may need longer (R6's 300 s, R14's 10 min, R3's hour).
SHOWCASE_SCENARIO = "data_loader_stall"
# The demo's analyzers look every few seconds, so that the first findings show within a minute of
# the URL (a production server looks every scheduler.interval_s = 60 s, at the data the arrival
# marks say has arrived; `--default-schedule` runs that schedule).
DEMO_SCHEDULE = {
    "FLEETSCOPE_SCHEDULER_INTERVAL_S": "10",
    "FLEETSCOPE_ANALYZERS_LATENESS_S": "10",
}
# The closed loop on (analyzers.autoprofile): a stall finding on a job with the SDK attached
# profiles it by itself, within the budget; no periodic sampling in a minutes-long tour.
AUTOPROFILE = {
    "FLEETSCOPE_AUTOPROFILE_ENABLED": "true",
    "FLEETSCOPE_AUTOPROFILE_TICK_S": "10",
    "FLEETSCOPE_AUTOPROFILE_PERIODIC": "false",
}
# Example prices, so the tour shows money; every page that shows money says they are examples
# (cost.prices_note). fleetscope itself has no default price (fleetscope/settings/rows_cost.py).
DEMO_PRICE_SETTINGS = {
    "cost.currency": "USD",
    "cost.gpu_hour_prices": "NVIDIA H100 80GB HBM3=2.50, NVIDIA A100 80GB PCIe=1.20",
    "cost.prices_note": "Example prices set by fleetscope demo (USD per GPU-hour: H100 2.50, "
    "A100 1.20) and an example grid intensity (400 g CO2e per kWh), not quotes.",
    "cost.grid_gco2e_per_kwh": "400",
}
# as the demo's processes read them; the CLI takes them from demo.json (app.demo_discovery)
DEMO_PRICES = {
    "FLEETSCOPE_" + key.upper().replace(".", "_"): value
    for key, value in DEMO_PRICE_SETTINGS.items()
}


def register(subparsers: Any) -> None:
    demo = subparsers.add_parser(
        "demo", help="Run a simulated fleet, agents, server and dashboard until Ctrl-C."
    )
    demo.add_argument("--hosts", type=int, default=None, help="simulated hosts (8 GPUs each)")
    demo.add_argument("--dir", default=".demo", help="folder for the demo's data and logs")
    demo.add_argument("--interval-s", type=float, default=5.0, help="agent scrape interval")
    demo.add_argument(
        "--duration-s", type=float, default=0.0, help="stop after this long (0: until Ctrl-C)"
    )
    demo.add_argument(
        "--default-schedule",
        action="store_true",
        help="analyse on the server's default schedule (scheduler.interval_s, "
        "analyzers.lateness_s), not the demo's 10 s: what bench.time_to_finding measures",
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
    hosts = args.hosts or settings.simulator.hosts
    server_port = settings.server.port
    dashboard_port = settings.dashboard.port
    base_port = settings.simulator.base_port
    ingest_url = f"http://127.0.0.1:{server_port}"
    token = new_token(18)  # handed to the demo's own processes, and printed
    common = {
        **({} if getattr(args, "default_schedule", False) else DEMO_SCHEDULE),
        "FLEETSCOPE_CORE_DATA_DIR": str(root / "data"),
        "FLEETSCOPE_SERVER_TOKENS": token,
        "FLEETSCOPE_SERVER_PORT": str(server_port),
        "FLEETSCOPE_DASHBOARD_PORT": str(dashboard_port),
        "FLEETSCOPE_DASHBOARD_DEFAULT_WINDOW": "last hour",  # the demo's data is minutes old
        **AUTOPROFILE,
        **DEMO_PRICES,
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
                f"--token={token}",  # one `=`: a token is never read as an option
                # its training processes report steps to each host's agent (sockets below)
                "--sdk-socket", str(root / "sock" / "agent-{index:02d}.sock"),
                "--showcase", SHOWCASE_SCENARIO,
                *(["--attach-job", TORCH_JOB] if _has_torch() else []),
            ],
            common,
        )  # fmt: skip
        # the simulator prints "<host> <url>" per host (base port 0: ports the kernel picked)
        exporters = _exporters(root / "logs" / "simulator.log", hosts, supervisor)
        for _name, url in exporters:
            wait_until(http_ok(url), 60, "simulated exporters", supervisor.check_alive)
        for index, (name, url) in enumerate(exporters):
            agent_env = {
                **common,
                "FLEETSCOPE_AGENT_DCGM_URL": url,
                # the simulated host's node_exporter page on the same port (simulator/serve.py):
                # its 96 CPUs and 2 TiB, busy with its jobs, not this machine's (psutil)
                "FLEETSCOPE_AGENT_NODE_EXPORTER_URL": _node_url(url),
                # the exporter's host label also names the host rows
                "FLEETSCOPE_AGENT_HOST": name,
                "FLEETSCOPE_AGENT_INGEST_URL": ingest_url,
                "FLEETSCOPE_AGENT_TOKEN": token,
                "FLEETSCOPE_AGENT_INTERVAL_S": str(args.interval_s),
                "FLEETSCOPE_AGENT_SHIP_INTERVAL_S": str(args.interval_s),
                "FLEETSCOPE_AGENT_SPOOL_DIR": str(root / "spool" / f"agent-{index:02d}"),
                "FLEETSCOPE_AGENT_METRICS_PORT": "0",
                "FLEETSCOPE_AGENT_SDK_SOCKET": str(root / "sock" / f"agent-{index:02d}.sock"),
            }
            supervisor.start(
                f"agent-{index:02d}", [_bin("fleetscope-agent"), "run"], agent_env, "agents"
            )
        trainer = _start_trainer(supervisor, root, ingest_url, token, common)
        cuda_trace = _upload_cuda_trace(ingest_url, token)
        supervisor.start("dashboard", [_bin("fleetscope"), "dashboard"], common)
        dashboard_url = f"http://127.0.0.1:{dashboard_port}"
        wait_until(
            http_ok(f"{dashboard_url}/_stcore/health"), 90, "dashboard", supervisor.check_alive
        )
        demo = demo_discovery.RunningDemo(
            pid=os.getpid(),
            data_dir=str(root / "data"),
            ingest_url=ingest_url,
            token=token,
            dashboard_url=dashboard_url,
            settings=DEMO_PRICE_SETTINGS,
        )
        announced = demo_discovery.discovery_file(settings).resolve()
        demo_discovery.announce(announced, demo)
        try:
            _print_tour(demo, hosts, announced, root, trainer, cuda_trace)
            started = time.monotonic()
            try:
                while args.duration_s <= 0 or time.monotonic() - started < args.duration_s:
                    supervisor.check_alive()
                    time.sleep(1.0)
            except KeyboardInterrupt:
                print("\nfleetscope demo: stopping...", flush=True)
        finally:
            demo_discovery.withdraw(announced, demo.pid)
    print("fleetscope demo: stopped; no process left running.")
    return 0


def _exporters(log: Path, hosts: int, supervisor: Supervisor) -> list[tuple[str, str]]:
    """(simulated host name, exporter URL) per host, in host order, from the simulator's log."""
    from app.supervise import wait_until

    pattern = re.compile(r"^(\S+) (http://127\.0\.0\.1:\d+/metrics)$")

    def found() -> list[tuple[str, str]]:
        text = log.read_text() if log.exists() else ""
        matches = (pattern.match(line) for line in text.splitlines())
        return [(m[1], m[2]) for m in matches if m]

    wait_until(lambda: len(found()) >= hosts, 60, "simulator host list", supervisor.check_alive)
    return found()[:hosts]


def _node_url(dcgm_url: str) -> str:
    """The node_exporter page the simulator serves next to a host's dcgm-exporter page."""
    from simulator.serve import NODE_PATH

    return dcgm_url.removesuffix("/metrics") + NODE_PATH


def _has_torch() -> bool:
    return importlib.util.find_spec("torch") is not None


def _start_trainer(
    supervisor: Supervisor, root: Path, ingest_url: str, token: str, common: dict[str, str]
) -> bool:
    """A real PyTorch training process on CPU, SDK attached to host 0's agent, when torch is
    installed; its job is announced to the catalog first, as a scheduler's prolog would."""
    if not _has_torch():
        return False
    record = {"job_id": TORCH_JOB, "user": "newcomer", "team": "demo", "name": TORCH_JOB_NAME}
    request = urllib.request.Request(
        f"{ingest_url}/v1/jobs",
        data=json.dumps([record]).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        answer.read()
    supervisor.start(
        "trainer",
        [sys.executable, "-m", "collector.sdk.example_trainer"],
        {
            **common,
            "FLEETSCOPE_JOB_ID": TORCH_JOB,
            "RANK": "0",
            "FLEETSCOPE_AGENT_SDK_SOCKET": str(root / "sock" / "agent-00.sock"),
        },
    )
    return True


def _upload_cuda_trace(ingest_url: str, token: str) -> str | None:
    """The real V100 trace as the demo job's profile (app.demo_trace); a failure is said, and
    the demo goes on without it."""
    from app import demo_trace

    try:
        return demo_trace.upload(ingest_url, token)
    except (OSError, RuntimeError, KeyError, ValueError) as exc:
        print(f"fleetscope demo: the CUDA trace was not uploaded: {exc}", file=sys.stderr)
        return None


def _print_tour(
    demo: demo_discovery.RunningDemo,
    hosts: int,
    announced: Path,
    root: Path,
    trainer: bool,
    cuda_trace: str | None = None,
) -> None:
    """What a newcomer needs on one screen: where to look, and how the CLI reaches this demo."""
    say = [
        f"{hosts} hosts x 8 GPUs simulated; first findings within a minute",
        f"dashboard at {demo.dashboard_url}",
        f"ingest at {demo.ingest_url}   token {demo.token}",
        f"logs in {root / 'logs'}",
        f"the CLI finds this demo by itself from this folder ({announced});",
        "  from another folder or shell, first run:",
        *(f"    {line}" for line in demo.export_lines()),
        "try:",
        "  fleetscope opportunities --window 1h",
        "  fleetscope report weekly --no-pdf",
    ]
    if trainer:
        say += [
            f"  fleetscope profile --job {TORCH_JOB} --steps 5"
            "   (a real PyTorch process on CPU, SDK attached)",
            f"  fleetscope job {TORCH_JOB}"
            "   (its kWh, example money and measured MFU, on a simulated GPU)",
        ]
    else:
        say += [
            "  (install torch, e.g. `pip install -e .[dev]`, for a real PyTorch job to profile)"
        ]
    if cuda_trace is not None:
        say += [
            f"  a real CUDA trace (ResNet-50 on V100) to explore: {demo.dashboard_url}/trace?"
            f"trace_id={urllib.parse.quote(cuda_trace, safe='')}"
        ]
    for line in say:
        print(f"fleetscope demo: {line}")
    print("fleetscope demo: press Ctrl-C to stop everything", flush=True)
