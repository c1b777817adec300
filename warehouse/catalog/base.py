"""The catalog's shared MetaData, column types, engine factory and dialect-neutral upsert.

The catalog holds transactional metadata with many small concurrent writers (design.md): SQLite in
WAL mode by default, PostgreSQL for fleets, through SQLAlchemy 2 Core. Every table module registers
on `metadata` here; every timestamp is a timezone-aware UTC datetime in Python whatever the
backend stores. This module must never hold telemetry samples: those live in DuckDB/Parquet.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import (
    Connection,
    DateTime,
    Dialect,
    Engine,
    MetaData,
    Table,
    create_engine,
    event,
    func,
    inspect,
    select,
    text,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeDecorator

from fleetscope.errors import ConfigError

metadata = MetaData()


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in and out; SQLite stores them naive, PostgreSQL as timestamptz."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: the catalog stores UTC-aware times")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)


def database_clock(engine: Engine) -> Callable[[], datetime]:
    """The catalog server's clock, for stamps that processes on many machines compare.

    Why: fleet gateways stamp arrival marks (warehouse.storage.arrival_hook) and the scheduler compares them
    with the marks it analysed; with each gateway's own clock, a gateway running a few seconds
    behind could stamp rows that landed after an analysis with an older time than the one that
    analysis covered, and they would never be analysed. One clock, PostgreSQL's, orders them.
    SQLite has no server: its clock is this process's.
    """
    if engine.dialect.name != "postgresql":
        return utcnow

    def now() -> datetime:
        with engine.connect() as conn:
            value = conn.execute(text("SELECT clock_timestamp()")).scalar_one()
        return value.astimezone(UTC)  # type: ignore[no-any-return]

    return now


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


def connect(url: str) -> Engine:
    """An engine for `url` with the catalog's tables created; SQLite files get WAL mode."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ConfigError(f"warehouse.catalog_url {url!r} is not a SQLAlchemy URL") from exc
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(parsed, pool_pre_ping=True)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    import warehouse.catalog  # noqa: F401  (registers every table on `metadata`)

    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            # Many gateways start at once in fleet mode: CREATE TABLE IF NOT EXISTS races in
            # PostgreSQL's own catalog (pg_type unique violation), so creation is serialised.
            conn.execute(text("SELECT pg_advisory_xact_lock(717217)"))
        metadata.create_all(conn)
        _add_missing_columns(conn)
    return engine


def _add_missing_columns(conn: Connection) -> None:
    """Add the nullable columns a newer build added to tables an older build created.

    Why: `create_all` creates missing tables, never missing columns, and the catalog has no
    migration files. A table lists such columns in `info["added_columns"]` (the ledger's
    `digest`); only those tables are inspected, so a connect stays one round trip per table that
    grew. Each added column is nullable, so adding it to an existing table is always safe.
    """
    grown = [t for t in metadata.sorted_tables if t.info.get("added_columns")]
    if not grown:
        return
    inspector = inspect(conn)
    for table in grown:
        present = {c["name"] for c in inspector.get_columns(table.name)}
        for name in table.info["added_columns"]:
            column = table.columns[name]
            if name not in present and column.nullable:
                kind = column.type.compile(dialect=conn.dialect)
                conn.execute(text(f'ALTER TABLE {table.name} ADD COLUMN "{name}" {kind}'))


Merge = Literal["replace", "least", "greatest", "coalesce", "keep"]


def upsert(
    conn: Connection,
    table: Table,
    rows: Sequence[Mapping[str, Any]],
    keys: Sequence[str],
    update: Mapping[str, Merge],
) -> None:
    """INSERT ... ON CONFLICT (keys) DO UPDATE, the same on SQLite and PostgreSQL.

    `update` says how each column merges with a stored row: `replace` takes the incoming value,
    `least`/`greatest` keep the smaller/larger (first_seen, last_seen), `coalesce` takes the
    incoming value unless it is null (a partial record never erases what is known), `keep` keeps the
    stored value unless it is null (a weaker source only fills gaps).
    """
    if not rows:
        return
    # One statement per shape, run as executemany: its compiled form is cached, where a
    # multi-row VALUES was compiled anew on every call (1.5 ms per upsert on the writer's
    # commit hooks, bench/RESULTS.md "Ingest against Prometheus").
    key = (conn.dialect.name, table, tuple(keys), tuple(update.items()), tuple(rows[0]))
    stmt = _UPSERTS.get(key)
    if stmt is None:
        stmt = _UPSERTS[key] = _upsert_statement(conn.dialect.name, table, keys, update)
    conn.execute(stmt, [dict(row) for row in rows])


_UPSERTS: dict[tuple[object, ...], Any] = {}


def _upsert_statement(
    dialect_name: str, table: Table, keys: Sequence[str], update: Mapping[str, Merge]
) -> Any:
    dialect = postgresql if dialect_name == "postgresql" else sqlite
    stmt = dialect.insert(table)
    pg = dialect_name == "postgresql"
    sets: dict[str, ColumnElement[Any]] = {}
    for col, how in update.items():
        new, old = stmt.excluded[col], table.c[col]
        if how == "replace":
            sets[col] = new
        elif how == "coalesce":
            sets[col] = func.coalesce(new, old)
        elif how == "keep":
            sets[col] = func.coalesce(old, new)
        else:
            least = how == "least"
            fn = (
                (func.least if least else func.greatest)
                if pg
                else (func.min if least else func.max)
            )
            # min()/max() of SQLite and least()/greatest() of PostgreSQL differ on nulls; coalesce
            # both ways so a stored null never wins over a value.
            sets[col] = fn(func.coalesce(old, new), func.coalesce(new, old))
    return stmt.on_conflict_do_update(index_elements=list(keys), set_=sets)


def rows_where(conn: Connection, table: Table, **equal: Any) -> list[dict[str, Any]]:
    """The rows of `table` whose columns equal the values given, oldest id first.

    A value of None is no filter (a listing's optional arguments pass straight through), so a
    column can't be matched to null here.
    """
    query = select(table).order_by(table.c.id)
    for name, value in equal.items():
        if value is not None:
            query = query.where(table.c[name] == value)
    return [dict(row) for row in conn.execute(query).mappings()]
