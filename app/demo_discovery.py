"""How the `fleetscope` CLI finds a running `fleetscope demo` by itself.

A newcomer runs `make demo` in one terminal and `fleetscope opportunities` in another; the demo keeps
its warehouse under its own folder and hands its agents a token of its own, so without help the CLI
would read an empty `var/` and the profile client would present the wrong token. The demo therefore
announces itself in a small JSON file, `<core.data_dir>/demo.json` (with the default settings,
`var/demo.json` in the folder the demo was started from), and removes it when it stops. The CLI reads
the file before a command runs and, while the demo's process is alive, takes the demo's data folder,
ingest URL and token, and the settings the demo runs with (its example prices, so that a report
the CLI writes prices what the dashboard prices), for every setting the user left at its default. Anything the user set (file or
environment) wins, and a file left behind by a killed demo is ignored because its process is gone.

Only what `fleetscope.settings` knows is used here: no import of the stages.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fleetscope.settings import Settings

FILE_NAME = "demo.json"

# Commands that start their own pipeline (or are the demo) never follow a running demo.
BLIND_COMMANDS = frozenset({"demo", "server", "simulate"})


@dataclass(frozen=True)
class RunningDemo:
    pid: int
    data_dir: str
    ingest_url: str
    token: str
    dashboard_url: str
    settings: dict[str, str] = field(default_factory=dict)  # key -> value, as the demo runs

    def overrides(self) -> dict[str, str]:
        """The settings a CLI process takes from the demo (keys as in `fleetscope.settings`)."""
        return {
            **self.settings,
            "core.data_dir": self.data_dir,
            "agent.ingest_url": self.ingest_url,
            "agent.token": self.token,
        }

    def export_lines(self) -> list[str]:
        """Shell lines that point a CLI elsewhere (another folder, another shell) at this demo."""
        return [
            f"export FLEETSCOPE_CORE_DATA_DIR={self.data_dir}",
            f"export FLEETSCOPE_AGENT_INGEST_URL={self.ingest_url}",
            f"export FLEETSCOPE_AGENT_TOKEN={self.token}",
        ]


def discovery_file(settings: Settings) -> Path:
    return settings.path(settings.core.data_dir) / FILE_NAME


def announce(path: Path, demo: RunningDemo) -> None:
    """Write the file atomically (a reader never sees half of it); only the owner may read it,
    since it holds the demo's token."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(asdict(demo), indent=2) + "\n")
    partial.chmod(0o600)
    partial.replace(path)


def withdraw(path: Path, pid: int) -> None:
    """Remove the file if it is still this demo's (a newer demo may have replaced it)."""
    found = read(path)
    if found is not None and found.pid == pid:
        path.unlink(missing_ok=True)


def read(path: Path) -> RunningDemo | None:
    try:
        raw = json.loads(path.read_text())
        return RunningDemo(
            pid=int(raw["pid"]),
            data_dir=str(raw["data_dir"]),
            ingest_url=str(raw["ingest_url"]),
            token=str(raw["token"]),
            dashboard_url=str(raw["dashboard_url"]),
            settings={str(k): str(v) for k, v in dict(raw.get("settings") or {}).items()},
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None  # no demo, or a file we cannot trust: behave as if there were none


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running(settings: Settings) -> RunningDemo | None:
    """The demo announced under these settings' data folder, if its process still runs."""
    found = read(discovery_file(settings))
    return found if found is not None and _alive(found.pid) else None


def follow(settings: Settings) -> tuple[Settings, RunningDemo | None]:
    """`settings` with the running demo's values for every key the user left at its default."""
    demo = running(settings)
    if demo is None:
        return settings, None
    taken = {
        key.replace(".", "__"): value
        for key, value in demo.overrides().items()
        # the file was found in the user's data folder, so its data folder always applies
        if key == "core.data_dir" or settings.source(key) == "default"
    }
    return settings.with_overrides(**taken), demo
