"""The quantile-sketch store every reader and writer sees: one interface, one implementation per
`server.mode`, chosen from `STORES` by `open_store(settings)` and nowhere else.

- `embedded`: Parquet files and a manifest under `analyzers.sketches_dir` on the local disk
  (`analyzers.quantiles.tiers.QuantileStore`): the one box's server, scheduler and CLI share it.
- `fleet`: one Iceberg table in the fleet's namespace (`analyzers.quantiles.fleet_store`), so
  workers on many machines keep their clusters' panes in one store, and the dashboard and the
  CLI anywhere read all of them, from the settings alone.

The runner's `_keep_sketches` writes (`keep`), `fleetscope quantiles`, the dashboard's Fleet page
and the fleet percentiles read (`connect` or `attach`, then `group_sketches` / `chosen_sql` on
the views `sketch_panes` and `sketch_buckets`); none of them asks which store it has. Both keep
the same panes from the same samples (`analyzers.quantiles.store_rows`: the marks, rebuilds and
retention of `tiers`' docstring).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from analyzers.accounting.frames import ts_literal
from analyzers.quantiles.panes import merged
from analyzers.quantiles.store_rows import BUCKETS, KEYS, PANES, ROLLUPS, Kept
from analyzers.run.parts import WHOLE, Scope
from fleetscope.errors import ConfigError

if TYPE_CHECKING:
    import duckdb

    from analyzers.base import JobCatalog
    from analyzers.run.window import Window
    from analyzers.sketch.core import QuantileSketch
    from fleetscope.settings import Settings

__all__ = ["STORES", "SketchStore", "chosen_sql", "group_sketches", "open_store", "tiers_of"]


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
    ) -> Kept:
        """Store every tier's whole panes of the window past the partition's marks (`cluster`:
        `conn` holds that cluster's rows only, a fleet part's)."""
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


def tiers_of(pane_s: int) -> tuple[int, ...]:
    if pane_s <= 0 or pane_s >= 60 or 60 % pane_s:
        raise ConfigError(f"analyzers.sketch_pane_s must divide 60 and be below it: {pane_s}")
    return (pane_s, *ROLLUPS)


def retention_of(settings: Settings) -> dict[int, float | None]:
    """How long each tier is kept (None: forever), from the settings."""
    pane_s = settings.analyzers.sketch_pane_s
    keep = {
        pane_s: settings.analyzers.sketch_pane_retention_s,
        60: settings.analyzers.sketch_minute_retention_s,
        3600: settings.analyzers.sketch_hour_retention_s,
    }
    return {res: (s if s > 0 else None) for res, s in keep.items()}


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


def chosen_sql(table: str, start: datetime, end: datetime, where: str = "TRUE") -> str:
    """Rows of `table` (a store view) for [start, end): per sketch key, the 1 h rows inside the
    range, the 1 min rows inside it no used hour covers, the panes no used minute or hour covers."""
    rng = (
        f"pane_start >= {ts_literal(start)} "
        f"AND pane_start + to_seconds(resolution_s) <= {ts_literal(end)} AND ({where})"
    )
    same = " AND ".join(f"x.{k} IS NOT DISTINCT FROM c.{k}" for k in KEYS)
    cover = f"SELECT DISTINCT {', '.join(KEYS)}, epoch_ms(pane_start) AS at_ms FROM {PANES}"
    return f"""
        SELECT x.* EXCLUDE (hour_ms, minute_ms) FROM (
            SELECT *, epoch_ms(pane_start) // 3600000 * 3600000 AS hour_ms,
                   epoch_ms(pane_start) // 60000 * 60000 AS minute_ms
            FROM {table} WHERE {rng}) x
        ANTI JOIN ({cover} WHERE resolution_s = 3600 AND {rng}) c
            ON {same} AND x.hour_ms = c.at_ms AND x.resolution_s < 3600
        ANTI JOIN ({cover} WHERE resolution_s = 60 AND {rng}) c
            ON {same} AND x.minute_ms = c.at_ms AND x.resolution_s < 60
    """


def group_sketches(
    conn: duckdb.DuckDBPyConnection,
    metric: str,
    keys: Sequence[str],
    start: datetime,
    end: datetime,
    where: str = "TRUE",
) -> dict[tuple[object, ...], QuantileSketch]:
    """One merged sketch per distinct `keys` of `metric`'s rows in [start, end) that satisfy the
    SQL condition `where` (views attached)."""
    where = "metric = '" + metric.replace("'", "''") + f"' AND ({where})"
    return merged(
        conn,
        chosen_sql(BUCKETS, start, end, where),
        chosen_sql(PANES, start, end, where),
        keys,
    )
