"""fleetscope's plug-in points, all in one place: an entry-point group and a typed protocol each.

A package extends fleetscope by declaring entry points in its own pyproject.toml, and the built-ins
register exactly that way (fleetscope's pyproject.toml), so a third party's rule, analysis,
command or server plug-in is found the same way as ours:

| group | an entry point names | protocol |
|---|---|---|
| `fleetscope.analyzers` | a rule class (telemetry or pipeline rule) | `analyzers.base.Analyzer` |
| `fleetscope.trace_analyses` | a module whose `@analysis` functions register themselves | |
| `fleetscope.trace_rules` | a trace rule function | `analyzers.traces.findings.Rule` |
| `fleetscope.commands` | a module with `register(subparsers)`; the name is the command | `CommandModule` |
| `fleetscope.server` | `setup(server)`, run before the ingest server starts | `ServerPlugin` |

A server plug-in hooks the server's events through the lists of `ServerHooks`: start, stop, batch
committed, trace uploaded. The warehouse runs these hooks and never names an analyzer.

The core declares the points and loads nothing itself: `registered(group)` reads the entry points
when a loader asks (the top-level `fleetscope --help` never does, to stay fast).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Protocol

if TYPE_CHECKING:
    from fleetscope.entry_point_cache import EntryPoint
    from fleetscope.settings import Settings

RULES: Final = "fleetscope.analyzers"
TRACE_ANALYSES: Final = "fleetscope.trace_analyses"
TRACE_RULES: Final = "fleetscope.trace_rules"
COMMANDS: Final = "fleetscope.commands"
SERVER: Final = "fleetscope.server"


class ServerHooks(Protocol):
    """What a server plug-in's `setup(server)` may use: settings and the event hook lists."""

    settings: Settings
    on_start: list[Callable[[Any], None]]  # (server): after the listener is up
    on_stop: list[Callable[[Any], None]]  # (server): before the writer flushes and closes
    on_batch_committed: list[Callable[[Any, Any], None]]  # (server, writer.Commit)
    on_trace_uploaded: list[Callable[[Any, Any], None]]  # (server, profiling_service.TraceUpload)


class ServerPlugin(Protocol):
    def __call__(self, server: ServerHooks) -> None: ...


class CommandModule(Protocol):
    def register(self, subparsers: Any) -> None: ...


def registered(group: str) -> dict[str, EntryPoint]:
    """The entry points of `group` by name, from every installed distribution (read once per
    process: installing a package means starting the process again)."""
    return dict(_registered(group))


@functools.cache
def _registered(group: str) -> tuple[tuple[str, EntryPoint], ...]:
    # Through a cache keyed on the import path's mtimes: scanning every installed distribution
    # cost ~40 ms of each run (fleetscope.entry_point_cache says why it stays correct).
    from fleetscope.entry_point_cache import entry_points

    return tuple((ep.name, ep) for ep in entry_points(group))
