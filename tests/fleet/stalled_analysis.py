"""A server plug-in whose trace hook never finishes until the test lets it, then returns without a
finish: what a server (embedded) or a gateway (fleet) killed in the middle of an analysis leaves in
the catalog (the process `analyzing`, never finished by it). It runs before the trace service's
hook (`PLUGIN_ORDER`), so a server loading both stalls before analysing. Named in `server.plugins`
by its entry-point name (tests.plugin_dist installs it for a test)."""

from __future__ import annotations

import threading
from typing import Any

SERVER_MODES = ("embedded", "fleet")
PLUGIN_ORDER = 10  # before analyzers.traces.service (20)
RELEASE = threading.Event()
STARTED = threading.Event()


def setup(server: Any) -> None:
    server.on_trace_uploaded.append(_stall)


def _stall(_server: Any, _upload: Any) -> None:
    STARTED.set()
    RELEASE.wait(120)
