"""`fleetscope dashboard`: run the Streamlit dashboard headless on `dashboard.port`.

Starts `streamlit run dashboard/app.py` as a child process with this process's settings passed
through the environment (`FLEETSCOPE_*`), so the app reads exactly what the CLI read. Nothing heavy
is imported here (app.cli's rule).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleetscope.settings import Settings


APP = Path(__file__).with_name("app.py")


def streamlit_command(port: int, address: str) -> list[str]:
    """The command line that serves the dashboard (headless, no telemetry to Streamlit Inc.)."""
    return [
        sys.executable, "-m", "streamlit", "run", str(APP),
        "--server.headless", "true",
        "--server.port", str(port),
        "--server.address", address,
        "--browser.gatherUsageStats", "false",
        "--global.developmentMode", "false",
        "--client.toolbarMode", "viewer",
    ]  # fmt: skip


def settings_env(settings: Settings) -> dict[str, str]:
    """The effective settings as FLEETSCOPE_* variables, so the app sees what the CLI loaded."""
    env = dict(os.environ)
    from fleetscope.settings import SETTINGS

    for setting in SETTINGS:
        value = settings.raw(setting.key)
        env[setting.env] = str(value).lower() if isinstance(value, bool) else str(value)
    return env


def run_dashboard(args: argparse.Namespace, settings: Settings) -> int:
    port = args.port if args.port is not None else settings.dashboard.port
    command = streamlit_command(port, args.address)
    from dashboard import auth

    if auth.enabled(settings):  # Streamlit's st.login reads its [auth] secrets (dashboard/auth.py)
        auth.check(settings)
        command += ["--secrets.files", str(auth.write_secrets(settings))]
    print(f"fleetscope dashboard on http://{args.address}:{port}/", flush=True)
    # Become the Streamlit server rather than wait on it: a SIGTERM to `fleetscope dashboard`
    # (a supervisor, a test, systemd) then reaches Streamlit itself and leaves no orphan behind.
    os.execve(command[0], command, settings_env(settings))


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "dashboard", help="Serve the Streamlit dashboard (fleet, jobs, traces, hosts)."
    )
    parser.add_argument("--port", type=int, default=None, help="port (default: dashboard.port)")
    parser.add_argument("--address", default="127.0.0.1", help="address to listen on")
    parser.set_defaults(handler=run_dashboard)
