"""A server plug-in whose trace hook never finishes until the test lets it: what a fleet gateway
killed in the middle of an analysis leaves in the catalog (the process `analyzing`, forever from
this gateway's side). Named in `server.plugins` by module (no entry point)."""

from __future__ import annotations

import threading
from typing import Any

SERVER_MODES = ("fleet",)
RELEASE = threading.Event()
STARTED = threading.Event()


def setup(server: Any) -> None:
    server.on_trace_uploaded.append(_stall)


def _stall(_server: Any, _upload: Any) -> None:
    STARTED.set()
    RELEASE.wait(120)
