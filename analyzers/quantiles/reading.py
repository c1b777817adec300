"""Reading the sketch store: per sketch key, the coarsest rows inside a range, merged per group.

Both stores (`analyzers.quantiles.store`) attach the same views, sketch_panes and sketch_buckets,
so one SQL answers from either.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from analyzers.accounting.frames import ts_literal
from analyzers.quantiles.panes import merged
from analyzers.quantiles.store_rows import BUCKETS, KEYS, PANES

if TYPE_CHECKING:
    import duckdb

    from analyzers.sketch.core import QuantileSketch


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
