"""A server plug-in that records each trace the hooks before it ran on, and which server ran them
(`ran_on`: (the server's analyser id, trace id)), after the trace service's and the closed loop's
hooks (`PLUGIN_ORDER`): a trace whose hooks ran twice, on two servers, shows twice. Named in
`server.plugins` by its entry-point name (tests.plugin_dist installs it for a test)."""

from __future__ import annotations

from typing import Any

SERVER_MODES = ("embedded", "fleet")
PLUGIN_ORDER = 90  # after analyzers.traces.service (20) and analyzers.autoprofile.plugin (50)
ran_on: list[tuple[str, str]] = []


def setup(server: Any) -> None:
    server.on_trace_uploaded.append(_count)


def _count(server: Any, upload: Any) -> None:
    ran_on.append((server.profiling.leases.analyser, upload.trace_id))
