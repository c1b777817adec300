"""Catalog tables as DataFrames, for the reports and the dashboard (which reads them the same way).

The tables are `warehouse.catalog`'s own; a catalog that does not exist yet reads as empty tables
with the right columns, so a report or page renders before the server first ran. Reads only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    import sqlalchemy


def catalog_frame(engine: sqlalchemy.Engine | None, name: str) -> pd.DataFrame:
    """A whole catalog table (`warehouse.catalog`) as a DataFrame; empty when it does not exist yet
    (a dashboard started before the server created the catalog still renders)."""
    if engine is None:
        return pd.DataFrame()
    import sqlalchemy

    from warehouse.catalog import metadata

    table = metadata.tables[name]
    try:
        if not sqlalchemy.inspect(engine).has_table(name):
            return pd.DataFrame(columns=[c.name for c in table.columns])
        with engine.connect() as connection:
            result = connection.execute(sqlalchemy.select(table))
            return pd.DataFrame(result.fetchall(), columns=list(result.keys()))
    except sqlalchemy.exc.OperationalError:
        return pd.DataFrame(columns=[c.name for c in table.columns])
