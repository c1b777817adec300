"""How the CLI finds the server's data when it was not told where it is (issue 31).

A platform engineer starts `fleetscope server` with its own FLEETSCOPE_CORE_DATA_DIR and then runs
`fleetscope opportunities` in another shell: the CLI's core.data_dir (default `./var`) is not the
server's. Before giving up, a reading command asks the server it would ship to
(`agent.ingest_url`) for `GET /v1/server`, which names the server's folders
(`warehouse.ingest.server.read_location`), and reads there when this machine has that folder. Anything the
user set wins; when the server cannot be asked, or its folder is not on this machine, the CLI says
exactly which setting to set. Never creates a folder.

Only the standard library and `fleetscope.settings` here: no import of the stages.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

from fleetscope.settings import Settings

ASK_TIMEOUT_S = 3.0
ROUTE = "/v1/server"


def ask(ingest_url: str, timeout_s: float = ASK_TIMEOUT_S) -> dict[str, str] | None:
    """The server's read location (setting key -> value), or None when nobody answers."""
    base = ingest_url.split(",")[0].strip().rstrip("/")
    if not base.startswith(("http://", "https://")):
        return None
    try:
        with urllib.request.urlopen(base + ROUTE, timeout=timeout_s) as answer:
            body = json.loads(answer.read(65536))
    except (OSError, ValueError, urllib.error.URLError):
        return None
    found = body.get("settings") if isinstance(body, dict) else None
    if not isinstance(found, dict):
        return None
    return {str(key): str(value) for key, value in found.items()}


MODE_KEY = "server.mode"
DATA_DIR_KEY = "core.data_dir"


def follow(settings: Settings) -> tuple[Settings, str]:
    """`settings` pointed at the server's data, or unchanged; and one sentence saying what was
    found (for the message either way)."""
    url = settings.agent.ingest_url
    found = ask(url)
    if found is None:
        return settings, f"no fleetscope server answered at {url} (agent.ingest_url)"
    # keys of the server's answer (GET /v1/server), not this process's settings
    mode = found.get(MODE_KEY, "embedded")
    if mode != "embedded":
        return settings, f"the server at {url} runs in {mode} mode"
    data_dir = found.get(DATA_DIR_KEY, "")
    if not data_dir or not Path(data_dir).is_dir():
        return settings, f"the server at {url} keeps its data at {data_dir}, not on this machine"
    taken = {
        key.replace(".", "__"): value
        for key, value in found.items()
        if key != MODE_KEY and value and settings.source(key) == "default"
    }
    return settings.with_overrides(**taken), f"the server at {url} keeps its data at {data_dir}"
