"""The fleet maker's one way out: contract tables, and where they go (a DuckDB or live segments).

Every description of a fleet (`jobs.Fleet`, `series.Fleet`) is a `Maker`: it gives its rows as
contract tables by table name (`fleetscope.contract.TABLES`). `connect` loads them into a DuckDB
database (the rule tests' warehouse), `publish` writes them as live warehouse segments (what the
writer does after a commit, so `warehouse.read.reader.connect` reads them like ingested data), and
`contract_table` fills a table's columns to its contract schema, missing ones as nulls.

It must never be pointed at a real warehouse's folder: it writes segments for tests, the demo and
the benchmarks only.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa

from fleetscope.contract import TABLES, conform

if TYPE_CHECKING:
    import duckdb


class Maker(Protocol):
    """A described fleet: its rows as contract tables by table name."""

    def tables(self) -> dict[str, pa.Table]: ...


def contract_table(schema: pa.Schema, columns: Mapping[str, pa.Array], rows: int) -> pa.Table:
    """`columns` cast to `schema`'s types in its order; a column not given is all nulls."""
    arrays = [
        columns[f.name].cast(f.type) if f.name in columns else pa.nulls(rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def rows_table(name: str, rows: list[dict[str, Any]]) -> pa.Table:
    """Row dicts (a column a key, missing keys null) as the contract table `name`, conformed."""
    schema = TABLES[name]
    if not rows:
        return schema.empty_table()
    cols = {f.name: [r.get(f.name) for r in rows] for f in schema}
    return conform(name, pa.table(cols, schema=schema))


def connect(maker: Maker, path: Path | None = None) -> duckdb.DuckDBPyConnection:
    """A DuckDB database (a file, or memory) holding the maker's tables, one table each."""
    import duckdb

    conn = duckdb.connect(str(path) if path else ":memory:")
    for name, table in maker.tables().items():
        conn.register("_load", table)
        conn.execute(f"CREATE TABLE {name} AS SELECT * FROM _load")
        conn.unregister("_load")
    return conn


def publish(maker: Maker, segments_dir: Path) -> None:
    """Publish the maker's tables as live warehouse segments in one commit."""
    from warehouse.storage.segments import SegmentStore

    store = SegmentStore(segments_dir)
    written = {name: store.write(name, table, 1) for name, table in maker.tables().items()}
    store.publish(1, written)
