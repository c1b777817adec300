"""Server plug-ins, loaded and run the same way by the embedded server and by a fleet gateway.

`load_plugins` is the one loading path: the installed `fleetscope.server` plug-ins (by their
entry-point names only) that `server.plugins` selects, in plug-in order, each checked against the kind of server loading
it (`server.mode`). A plug-in declares the servers it can run on (`SERVER_MODES`,
fleetscope.plugins.server_modes; embedded only when it says nothing): `*` then loads only those
a server of that mode can run, and a plug-in named outright that cannot run there is refused with
a ConfigError naming it, before the server opens anything, rather than failing later (a fleet
gateway must never open a DuckDB file, which the embedded-only plug-ins read or write).

`PluginHost` holds the hook lists of fleetscope.plugins.ServerHooks and runs them: both servers
inherit it, so a hook sees the same events in either mode. Names no analyzer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fleetscope import plugins
from fleetscope.errors import ConfigError

if TYPE_CHECKING:
    from warehouse.profiling.service import ProfilingService

log = logging.getLogger(__name__)

Hook = Callable[[Any], None]  # (server)
TraceHook = Callable[[Any, Any], None]  # (server, profiling_service.TraceUpload)
CommitPluginHook = Callable[[Any, Any], None]  # (server, writer.Commit)


class PluginHost:
    """The event hook lists a plug-in's `setup(server)` appends to, and their running."""

    profiling: ProfilingService

    def _init_hooks(self) -> None:
        self.on_start: list[Hook] = []
        self.on_stop: list[Hook] = []
        self.on_trace_uploaded: list[TraceHook] = []
        self.on_batch_committed: list[CommitPluginHook] = []
        # Extra HTTP routes (method, pattern, name, handler), served after warehouse.ingest.server's
        # own: a plug-in's read API (analyzers.read_api). The server's Ingest holds this list.
        self.routes: list[tuple[str, Any, str, Callable[..., Any]]] = []

    def _batch_committed(self, commit: Any) -> None:
        """Run every on_batch_committed hook (the writer logs a failing one; rows stay committed)."""
        for hook in self.on_batch_committed:
            hook(self, commit)

    def _trace_uploaded(self, upload: Any) -> bool:
        """Run every on_trace_uploaded hook; False when none is registered (nothing analyzes).
        Each runs only while this server holds the trace's analysis: once another server took it
        over (this one stopped renewing its lease, warehouse.profiling.analysis_leases), that server runs
        the hooks, and this one's would store their outcome a second time."""
        for hook in self.on_trace_uploaded:
            if not self.profiling.holds(upload):
                log.warning("trace %s: analysed by another server now; hooks stop here", upload)
                break
            hook(self, upload)
        return bool(self.on_trace_uploaded)

    def _started(self) -> None:
        for hook in self.on_start:
            hook(self)

    def _stopping(self) -> None:
        for hook in reversed(self.on_stop):
            try:
                hook(self)
            except Exception:
                log.exception("on_stop hook %r failed", hook)


def load_plugins(spec: str, *, mode: str = "embedded") -> list[plugins.ServerPlugin]:
    """The `setup(server)` of each plug-in `server.plugins` selects (`*`: every installed one
    a `mode` server can run, `-name`: leave one out; fleetscope.plugins.select_names), in plug-in
    order (`PLUGIN_ORDER`, then name) whichever way each was selected, so a hook that reads what
    another stored runs after it. ConfigError for a plug-in named outright that `mode` cannot run."""
    words = {word.strip() for word in spec.split(",")}
    installed = plugins.required(plugins.SERVER) if plugins.ALL in words else {}
    names = plugins.select_names(spec, list(installed))
    loaded = [(name, load_plugin(name)) for name in names]
    unfit = {name: plugins.server_modes(s) for name, s in loaded}
    unfit = {name: modes for name, modes in unfit.items() if mode not in modes}
    named = [f"{n} (runs on: {', '.join(unfit[n])})" for n in sorted(unfit) if n in words]
    if named:
        raise ConfigError(
            f"server.plugins: {'; '.join(named)} cannot run with server.mode = {mode!r}; leave "
            f"it out of server.plugins there (`*` loads only the plug-ins such a server runs)"
        )
    for name in unfit:
        log.info("server.plugins: %s runs on %s servers only; not loaded", name, unfit[name])
    kept = [(name, setup) for name, setup in loaded if name not in unfit]
    return [setup for _, setup in plugins.sort_loaded(kept)]


def load_plugin(name: str) -> plugins.ServerPlugin:
    """A `server.plugins` name's `setup(server)`: an entry point of the group `fleetscope.server`
    (how the analyzers register theirs, as any third party would). Only entry-point names: a
    plug-in loads through fleetscope.plugins, the one loader, or not at all."""
    registered = plugins.registered(plugins.SERVER)
    if name not in registered:
        raise ConfigError(
            f"server.plugins: no installed server plug-in is named {name!r}; installed: "
            f"{', '.join(sorted(registered)) or 'none'} (a plug-in is an entry point of the "
            f"group {plugins.SERVER} in its package's pyproject.toml)"
        )
    try:
        setup = registered[name].load()
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"server.plugins: cannot load {name}: {exc}") from exc
    if not callable(setup):
        raise ConfigError(f"server.plugins: {name} is not callable")
    hook: plugins.ServerPlugin = setup
    return hook
