"""The Analyzer protocol, the job catalog it reads owners from, and the registry.

Every analyzer, built-in or external, is found the same way: an entry point in the group
`fleetscope.analyzers` naming a class (or factory) that builds an `Analyzer` from its thresholds.
Built-ins are listed in this project's `pyproject.toml` exactly as a third-party package would list
its own; adding an analyzer never edits a central if-chain.

This module must never touch storage: analyzers read telemetry through the DuckDB connection they
are given and return findings; persisting them is the runner's and the store's job.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, runtime_checkable

from fleetscope import plugins
from fleetscope.errors import ConfigError

if TYPE_CHECKING:
    import duckdb

    from analyzers.findings import Finding
    from analyzers.run.window import Window

ENTRY_POINT_GROUP = plugins.RULES

PartitionKey = Literal["job", "host", "none"]


@dataclass(frozen=True, slots=True)
class JobInfo:
    """What the scheduler knows about a job: owner, team, its name and model (for ranking)."""

    job_id: str
    user: str | None = None
    team: str | None = None
    name: str | None = None
    model: str | None = None


@runtime_checkable
class JobCatalog(Protocol):
    """Where analyzers look up a job's owner. The warehouse catalog implements it."""

    def get(self, job_id: str) -> JobInfo | None: ...


class StaticJobCatalog:
    """A JobCatalog over a dict: tests, the evaluation harness, and deployments without a catalog."""

    def __init__(self, jobs: Iterable[JobInfo] = ()) -> None:
        self._jobs = {job.job_id: job for job in jobs}

    def get(self, job_id: str) -> JobInfo | None:
        return self._jobs.get(job_id)

    def add(self, job: JobInfo) -> None:
        self._jobs[job.job_id] = job


@runtime_checkable
class Analyzer(Protocol):
    """One rule or a family of closely related rules.

    - `name`: the registry name (the entry point's name), also the key of its thresholds section.
    - `rule_ids`: the catalog ids it implements (rules.md); every finding it returns uses one.
    - `inputs`: the contract tables it reads.
    - `partition_by`: how the fleet may be cut for it: "job" (a job's rows stay together), "host",
      or "none" (it needs the whole fleet: runs in partition 0 only).
    - `thresholds`: a frozen dataclass of numbers with the catalog's defaults, sources cited.
    - optionally `lookback_s`: seconds of samples before the window it reads (`lookback_of`).
    """

    name: ClassVar[str]
    rule_ids: ClassVar[tuple[str, ...]]
    inputs: ClassVar[tuple[str, ...]]
    partition_by: ClassVar[PartitionKey]
    thresholds: Any

    def run(
        self, conn: duckdb.DuckDBPyConnection, window: Window, catalog: JobCatalog
    ) -> list[Finding]: ...


def lookback_of(analyzers: Iterable[object]) -> float:
    """The longest look-back before a window that any of `analyzers` reads (issue 31: R3 sees an
    idle stretch that began before its bucket); an analyzer without `lookback_s` needs none."""
    return max((float(getattr(a, "lookback_s", 0.0)) for a in analyzers), default=0.0)


@runtime_checkable
class CombinedAnalyzer(Protocol):
    """A fleet-wide analyzer (`partition_by = "none"`) whose answer can be assembled from parts.

    Fleet mode cuts a scheduled window per cluster, and no worker reads the whole fleet: such an
    analyzer returns a small JSON-ready `partial` from each cluster's rows (one row per job, say),
    and `combine` turns every part's rows, concatenated, into the findings it would have found on
    all the rows at once. `run` must equal `combine(partial(conn, window), window, catalog)`. A
    fleet-wide analyzer without these two methods gets one task that reads the whole window.
    """

    def partial(self, conn: duckdb.DuckDBPyConnection, window: Window) -> list[dict[str, Any]]: ...

    def combine(
        self, rows: Sequence[Mapping[str, Any]], window: Window, catalog: JobCatalog
    ) -> list[Finding]: ...


AnalyzerFactory = Callable[..., Analyzer]


def discover() -> dict[str, AnalyzerFactory]:
    """Every registered analyzer factory by name, built-ins and external packages alike, through
    the one plug-in loader (fleetscope.plugins: a name two packages claim fails to load there)."""
    return {name: factory for name, factory in sorted(plugins.load_group(ENTRY_POINT_GROUP))}


def with_thresholds(thresholds: Any, overrides: Mapping[str, Any], name: str) -> Any:
    """A copy of a thresholds dataclass with some fields replaced; unknown or mistyped: ConfigError."""
    fields = {f.name: f for f in dataclasses.fields(thresholds)}
    clean: dict[str, Any] = {}
    for key, value in overrides.items():
        if key not in fields:
            raise ConfigError(
                f"analyzer {name}: unknown threshold {key!r}; known: {sorted(fields)}"
            )
        current = getattr(thresholds, key)
        if (
            isinstance(current, bool)
            or not isinstance(value, int | float)
            or isinstance(value, bool)
        ):
            raise ConfigError(f"analyzer {name}: threshold {key} must be a number, got {value!r}")
        clean[key] = type(current)(value)
    return dataclasses.replace(thresholds, **clean)


def load_threshold_overrides(path: Path | None) -> dict[str, dict[str, Any]]:
    """Read `[analyzer_name] threshold = value` tables from a TOML file (none: no overrides)."""
    if path is None or not str(path):
        return {}
    try:
        with path.open("rb") as handle:
            table = tomllib.load(handle)
    except FileNotFoundError as exc:
        raise ConfigError(f"thresholds file {path} does not exist") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"thresholds file {path}: {exc}") from exc
    out: dict[str, dict[str, Any]] = {}
    for name, section in table.items():
        if not isinstance(section, dict):
            raise ConfigError(f"thresholds file {path}: [{name}] must be a table")
        out[name] = section
    return out


def load_analyzers(
    enabled: Iterable[str] = (),
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Analyzer]:
    """Instantiate registered analyzers (all, or those named in `enabled`) with their thresholds."""
    factories = discover()
    names = [n for n in enabled if n] or list(factories)
    unknown = sorted(set(names) - set(factories)) + sorted(set(overrides or {}) - set(factories))
    if unknown:
        raise ConfigError(f"unknown analyzer(s) {unknown}; registered: {sorted(factories)}")
    out: list[Analyzer] = []
    for name in names:
        analyzer = factories[name]()
        section = (overrides or {}).get(name)
        if section:
            analyzer.thresholds = with_thresholds(analyzer.thresholds, section, name)
        out.append(analyzer)
    return out


def rule_registry(analyzers: Iterable[Analyzer]) -> dict[str, str]:
    """rule id -> analyzer name; a rule implemented twice is a configuration error."""
    owners: dict[str, str] = {}
    for analyzer in analyzers:
        for rule in analyzer.rule_ids:
            if rule in owners:
                raise ConfigError(f"rule {rule} implemented by {owners[rule]} and {analyzer.name}")
            owners[rule] = analyzer.name
    return owners


def hours_between(a: datetime, b: datetime) -> float:
    return (b - a) / timedelta(hours=1)
