"""The quantile-sketch store every reader and writer sees: one interface, one implementation per
`server.mode`, chosen from `STORES` by `open_store(settings)` and nowhere else.

- `embedded`: Parquet files and a manifest under `analyzers.sketches_dir` on the local disk
  (`analyzers.quantiles.tiers.QuantileStore`): the one box's server, scheduler and CLI share it.
- `fleet`: one Iceberg table in the fleet's namespace (`analyzers.quantiles.fleet_store`), so
  workers on many machines keep their clusters' panes in one store, and the dashboard and the
  CLI anywhere read all of them, from the settings alone.

The runner's `_keep_sketches` writes (`keep`), `fleetscope quantiles`, the dashboard's Fleet page
and the fleet percentiles read (`connect` or `attach`, then `reading.group_sketches` / `chosen_sql`
on the views `sketch_panes` and `sketch_buckets`); none of them asks which store it has. Both keep
the same panes from the same samples (`analyzers.quantiles.store_rows`: the marks, rebuilds and
retention of `tiers`' docstring).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from analyzers.quantiles.reading import chosen_sql, group_sketches
from analyzers.quantiles.store_rows import Kept
from analyzers.run.parts import WHOLE, Scope
from fleetscope.errors import ConfigError

if TYPE_CHECKING:
    import duckdb

    from analyzers.base import JobCatalog
    from analyzers.run.window import Window
    from fleetscope.settings import Settings

__all__ = [
    "STORES",
    "SketchStore",
    "chosen_sql",
    "group_sketches",
    "open_store",
]


class SketchStore(Protocol):
    """Pane sketches in three tiers (`pane_s`, 1 min, 1 h), kept a window at a time."""

    pane_s: int
    tiers: tuple[int, ...]

    def keep(
        self,
        conn: duckdb.DuckDBPyConnection,
        window: Window,
        catalog: JobCatalog,
        cluster: Scope = WHOLE,
        hosts: Sequence[Sequence[str]] = (),
    ) -> Kept:
        """Store every tier's whole panes of the window past the partition's marks (`cluster`:
        `conn` holds that cluster's rows only, a fleet part's; `hosts`: the window is read in
        these host slices, each slice's panes built on its own cursor, `store_rows.tier_rows`)."""
        ...

    def attach(
        self,
        conn: duckdb.DuckDBPyConnection,
        start: datetime | None = None,
        end: datetime | None = None,
    ) -> None:
        """(Re)define the temp views sketch_panes and sketch_buckets on `conn`; with a range,
        they need hold only the rows of panes starting in [start, end)."""
        ...

    def connect(
        self, start: datetime | None = None, end: datetime | None = None
    ) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB with the views attached."""
        ...

    def has_rows(self) -> bool: ...


def _local(settings: Settings) -> SketchStore:
    from analyzers.quantiles.tiers import QuantileStore

    return QuantileStore.from_settings(settings)


def _fleet(settings: Settings) -> SketchStore:
    from analyzers.quantiles.fleet_store import FleetSketchStore

    return FleetSketchStore.from_settings(settings)


STORES: Mapping[str, Callable[[Settings], SketchStore]] = {"embedded": _local, "fleet": _fleet}


def open_store(settings: Settings) -> SketchStore:
    """The sketch store of the settings' `server.mode`."""
    mode = settings.server.mode
    if mode not in STORES:
        raise ConfigError(f"no quantile-sketch store for server.mode {mode!r}: {sorted(STORES)}")
    return STORES[mode](settings)
