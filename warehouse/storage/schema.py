"""DuckDB column definitions derived from the Arrow schemas of fleetscope.contract.

The contract is the single source of truth for columns; the migration SQL is checked against what
this module derives (tests/warehouse/test_migrations.py) and the writer refuses to start on a
database whose tables drift from it. This module must never change a database: it only reads.
"""

from __future__ import annotations

from collections.abc import Mapping

import duckdb
import pyarrow as pa

from fleetscope.errors import ConfigError

_SCALARS: dict[pa.DataType, str] = {
    pa.string(): "VARCHAR",
    pa.int16(): "SMALLINT",
    pa.int32(): "INTEGER",
    pa.int64(): "BIGINT",
    pa.float64(): "DOUBLE",
    pa.date32(): "DATE",
}


def duckdb_type(arrow_type: pa.DataType) -> str:
    """The DuckDB type that stores `arrow_type` without loss (as DESCRIBE spells it)."""
    if pa.types.is_timestamp(arrow_type):
        return "TIMESTAMP WITH TIME ZONE" if arrow_type.tz else "TIMESTAMP"
    if pa.types.is_map(arrow_type):
        return f"MAP({duckdb_type(arrow_type.key_type)}, {duckdb_type(arrow_type.item_type)})"
    try:
        return _SCALARS[arrow_type]
    except KeyError:
        raise ConfigError(f"no DuckDB type is mapped for Arrow type {arrow_type}") from None


def columns(schema: pa.Schema) -> list[tuple[str, str, bool]]:
    """(name, DuckDB type, nullable) per column, in contract order."""
    return [(f.name, duckdb_type(f.type), f.nullable) for f in schema]


def create_table_sql(name: str, schema: pa.Schema) -> str:
    """`CREATE TABLE IF NOT EXISTS` for one Arrow schema (used for empty reader tables too)."""
    body = ",\n    ".join(
        f"{col} {typ}{'' if nullable else ' NOT NULL'}" for col, typ, nullable in columns(schema)
    )
    return f"CREATE TABLE IF NOT EXISTS {name} (\n    {body}\n);"


def describe(conn: duckdb.DuckDBPyConnection, table: str) -> list[tuple[str, str, bool]]:
    """(name, type, nullable) of a table as the database has it."""
    rows = conn.execute(f"DESCRIBE {table}").fetchall()
    return [(str(r[0]), str(r[1]), r[2] == "YES") for r in rows]


def check_tables(conn: duckdb.DuckDBPyConnection, tables: Mapping[str, pa.Schema]) -> None:
    """Raise ConfigError naming the first column where the database differs from the contract."""
    for name, schema in tables.items():
        have = describe(conn, name)
        want = columns(schema)
        if have != want:
            diff = next(
                (f"{w} != {h}" for w, h in zip(want, have, strict=False) if w != h),
                f"{len(want)} columns expected, {len(have)} found",
            )
            raise ConfigError(
                f"telemetry table {name} differs from fleetscope.contract ({diff}); "
                "a warehouse migration is missing"
            )
