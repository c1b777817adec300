"""The server plug-in that runs analyzers in-process: add `analyzers.run.embedded` to
`server.plugins` (warehouse.ingest.runtime loads it and calls `setup(server)`). With `scheduler.mode`
set to `celery` it does nothing: beat and workers run the analyzers instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Server plug-in order (fleetscope.plugins): first to start, last to stop, as it always was.
PLUGIN_ORDER = 10
# The embedded server only (fleetscope.plugins.server_modes): it reads the server's DuckDB
# warehouse. In fleet mode Celery beat and workers run the analyzers (scheduler.mode = celery).
SERVER_MODES = ("embedded",)


def setup(server: Any) -> None:
    if server.settings.scheduler.mode != "embedded":
        return
    from analyzers.run.schedule import start_embedded

    stoppers: list[Callable[[], None]] = []

    def on_start(srv: Any) -> None:
        stoppers.append(start_embedded(srv.settings, srv.warehouse))

    def on_stop(_srv: Any) -> None:
        while stoppers:
            stoppers.pop()()

    server.on_start.append(on_start)
    server.on_stop.append(on_stop)
