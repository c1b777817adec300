"""fleetscope's plug-in points, all in one place: an entry-point group and a typed protocol each.

A package extends fleetscope by declaring entry points in its own pyproject.toml, and the built-ins
register exactly that way (fleetscope's pyproject.toml), so a third party's rule, analysis,
command or server plug-in is found the same way as ours. Nothing in the repository lists the
built-ins a second time:

| group | an entry point names | protocol |
|---|---|---|
| `fleetscope.analyzers` | a rule class (telemetry or pipeline rule) | `analyzers.base.Analyzer` |
| `fleetscope.trace_analyses` | a module whose `@analysis` functions register themselves | `AnalysisModule` |
| `fleetscope.trace_rules` | a trace rule function (the entry-point name is its rule id) | `analyzers.traces.findings.Rule` |
| `fleetscope.commands` | a command's card: a module with `HELP` and `register(subparsers)`; the name is the command | `CommandCard` |
| `fleetscope.server` | `setup(server)`, run before the ingest server starts | `ServerPlugin` |

Order, where it matters (the trace report, server hooks that read what an earlier hook stored):
a plug-in's module may set `PLUGIN_ORDER: int` (lower first, `DEFAULT_ORDER` when absent); ties go
by entry-point name in natural order (`T2` before `T10`). `sort_loaded` applies it. setuptools
writes entry points sorted by name, so the order of lines in pyproject.toml carries nothing.

A server plug-in hooks the server's events through the lists of `ServerHooks`: start, stop, batch
committed, trace uploaded. The warehouse runs these hooks and never names an analyzer: the setting
`server.plugins` selects among the installed plug-ins (`select_names`), `*` (the default) being
all of them. Which servers may run one (`server_modes`): a plug-in's module may set
`SERVER_MODES: tuple[str, ...]`, the `server.mode` values whose server runs it; without it,
`("embedded",)`, since a plug-in written before fleet gateways may use the embedded server's
DuckDB warehouse, which a gateway does not have (it must never open a DuckDB file).

The core declares the points and loads nothing itself: `registered(group)` reads the entry points
when a loader asks. The top-level `fleetscope --help` reads `fleetscope.commands` and imports only
the cards (app/commands/), never a command's implementation.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from fleetscope.settings import Settings

RULES: Final = "fleetscope.analyzers"
TRACE_ANALYSES: Final = "fleetscope.trace_analyses"
TRACE_RULES: Final = "fleetscope.trace_rules"
COMMANDS: Final = "fleetscope.commands"
SERVER: Final = "fleetscope.server"

DEFAULT_ORDER: Final = 1000  # without PLUGIN_ORDER: after the built-ins (theirs are below 1000)
DEFAULT_SERVER_MODES: Final = ("embedded",)  # without SERVER_MODES: the embedded server only
ALL: Final = "*"  # in `server.plugins`: every installed server plug-in

T = TypeVar("T")


class ServerHooks(Protocol):
    """What a server plug-in's `setup(server)` may use: settings, the server's parts (typed `Any`
    here: the core may not import the warehouse) and the event hook lists. warehouse.ingest.startup's
    `IngestProcess` (both modes) is checked against it where it calls `setup(self)`."""

    settings: Settings
    catalog: Any  # sqlalchemy Engine of the catalog
    warehouse: Any  # warehouse.read.reader.Warehouse: the in-process read handle; None on a gateway
    profiling: Any  # warehouse.profiling.service.ProfilingService
    metrics: Any  # warehouse.ingest.metrics.ServerMetrics (its prometheus registry)
    auth: Any  # warehouse.ingest.auth.TokenChecker: the ingest tokens (settings and catalog)
    on_start: list[Callable[[Any], None]]  # (server): after the listener is up
    on_stop: list[Callable[[Any], None]]  # (server): before the writer flushes and closes
    on_batch_committed: list[Callable[[Any, Any], None]]  # (server, writer.Commit)
    on_trace_uploaded: list[Callable[[Any, Any], None]]  # (server, profiling_service.TraceUpload)
    routes: list[tuple[str, Any, str, Callable[..., Any]]]  # (method, re pattern, name, handler)


class ServerPlugin(Protocol):
    def __call__(self, server: ServerHooks) -> None: ...


class CommandCard(Protocol):
    """A command's card: what `fleetscope --help` reads (`HELP`, one line) without importing the
    command's implementation, and `register`, which imports it and adds the command's parser.
    A card without `HELP` (a plug-in written before cards) is listed with its docstring's first
    line."""

    def register(self, subparsers: Any) -> None: ...


CommandModule = CommandCard  # its name before cards (a module with `register`), kept for plug-ins


class AnalysisModule(Protocol):
    """A trace-analysis module: importing it registers its `@analysis` functions; its
    `PLUGIN_ORDER` is its place in the report."""

    PLUGIN_ORDER: int


def command_help(card: object) -> str | None:
    """The one-line help of a command card: its `HELP`, else its docstring's first line."""
    text = getattr(card, "HELP", None)
    if isinstance(text, str):
        return text
    doc = getattr(card, "__doc__", None)
    return doc.strip().splitlines()[0] if isinstance(doc, str) and doc.strip() else None


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """`T2` before `T10`: digit runs compare as numbers."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", name) if part
    )


def order_of(obj: object) -> int:
    """A loaded plug-in's `PLUGIN_ORDER`: the object's own, else its module's, else the default."""
    own = getattr(obj, "PLUGIN_ORDER", None)
    if isinstance(own, int):
        return own
    module = sys.modules.get(getattr(obj, "__module__", "") or "")
    found = getattr(module, "PLUGIN_ORDER", DEFAULT_ORDER)
    return found if isinstance(found, int) else DEFAULT_ORDER


def server_modes(obj: object) -> tuple[str, ...]:
    """The `server.mode` values whose server may run a loaded server plug-in: its module's
    `SERVER_MODES`, else `DEFAULT_SERVER_MODES`."""
    module = sys.modules.get(getattr(obj, "__module__", "") or "")
    found = getattr(obj, "SERVER_MODES", getattr(module, "SERVER_MODES", DEFAULT_SERVER_MODES))
    if isinstance(found, str) or not all(isinstance(mode, str) for mode in found):
        return DEFAULT_SERVER_MODES
    return tuple(found)


def sort_loaded(loaded: Iterable[tuple[str, T]]) -> list[tuple[str, T]]:
    """Loaded plug-ins `(entry-point name, object)` by `PLUGIN_ORDER`, then name."""
    return sorted(loaded, key=lambda item: (order_of(item[1]), natural_key(item[0])))


def load_group(group: str) -> list[tuple[str, Any]]:
    """Every entry point of `group` loaded, in plug-in order."""
    return sort_loaded((name, entry.load()) for name, entry in required(group).items())


def required(group: str) -> dict[str, EntryPoint]:
    """`registered(group)` for a group fleetscope itself fills: empty means the installed metadata
    predates the entry points (a checkout updated without reinstalling), which would otherwise
    pass silently as no commands, no analyses or no rules."""
    found = registered(group)
    if not found:
        from fleetscope.errors import ConfigError

        raise ConfigError(
            f"no entry points in {group}: fleetscope's installed metadata is older than its "
            "pyproject.toml; reinstall it (pip install --no-deps -e . in a checkout)"
        )
    return found


def select_names(spec: str, installed: Sequence[str]) -> list[str]:
    """The plug-in names a selection such as `server.plugins` picks, in order.

    Comma-separated words: `*` adds every installed plug-in (in the order given, `installed`),
    a name adds that plug-in (an installed entry-point name), `-name` leaves that
    one out wherever it stands (`*,-analyzers.autoprofile.plugin`).
    An empty selection picks none (how tests and benchmarks run a bare server)."""
    chosen: list[str] = []
    removed: set[str] = set()
    for word in (w.strip() for w in spec.split(",")):
        if word == ALL:
            chosen.extend(installed)
        elif word.startswith("-"):
            removed.add(word[1:].strip())
        elif word:
            chosen.append(word)
    return [n for n in dict.fromkeys(chosen) if n not in removed]


def registered(group: str) -> dict[str, EntryPoint]:
    """The entry points of `group` by name, from every installed distribution (read once per
    process: installing a package means starting the process again).

    A name two distributions give different values is a clash, not "the last one wins": that
    entry's `load()` raises ConfigError naming both, so the clashing command, rule or analysis
    fails with that message (a command is listed as broken, as any plug-in that cannot load)
    and nothing silently runs in its place. The same value twice (one package on the path
    twice) is one entry."""
    found: dict[str, EntryPoint] = {}
    clashes: dict[str, list[str]] = {}
    for name, entry in _registered(group):
        first = found.setdefault(name, entry)
        if first.value != entry.value and entry.value not in clashes.setdefault(
            name, [first.value]
        ):
            clashes[name].append(entry.value)
    for name, values in clashes.items():
        if len(values) > 1:
            found[name] = _clash(name, group, values)
    return found


def _clash(name: str, group: str, values: list[str]) -> EntryPoint:
    from importlib.metadata import EntryPoint

    class ClashingEntryPoint(EntryPoint):
        __slots__ = ()

        def load(self) -> Any:
            from fleetscope.errors import ConfigError

            raise ConfigError(
                f"{len(values)} installed packages claim the name {name!r} in {group} "
                f"({' and '.join(values)}); uninstall all but one"
            )

    return ClashingEntryPoint(name, " | ".join(values), group)


@functools.cache
def _registered(group: str) -> tuple[tuple[str, EntryPoint], ...]:
    from importlib.metadata import entry_points

    return tuple((ep.name, ep) for ep in entry_points(group=group))
