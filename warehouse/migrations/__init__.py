"""Versioned schema migrations of the telemetry DuckDB database.

Migrations are the files `NNNN_<name>.sql` next to this module, applied in order, each in its own
transaction, and recorded in `schema_migrations`; applying is idempotent. A migration is never
edited once released: a schema change is a new file (and a new contract SCHEMA_VERSION). This
module must never be run against a database another process holds: only the writer calls it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import duckdb

from fleetscope.errors import ConfigError

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def available() -> list[Migration]:
    """Every migration shipped with the package, oldest first."""
    found = []
    for entry in resources.files(__name__).iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise ConfigError(f"migrations must be numbered 1..n without gaps, found {versions}")
    return found


def applied(conn: duckdb.DuckDBPyConnection) -> list[int]:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, name VARCHAR NOT NULL,"
        " applied_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT current_timestamp)"
    )
    rows = conn.execute("SELECT version FROM schema_migrations ORDER BY version").fetchall()
    return [int(r[0]) for r in rows]


def migrate(conn: duckdb.DuckDBPyConnection) -> list[int]:
    """Apply the migrations this database lacks; return the versions applied now."""
    done = set(applied(conn))
    shipped = available()
    newest = shipped[-1].version if shipped else 0
    if done and max(done) > newest:
        raise ConfigError(
            f"telemetry database is at schema version {max(done)}, newer than this build "
            f"({newest}); upgrade fleetscope"
        )
    now_applied = []
    for migration in shipped:
        if migration.version in done:
            continue
        conn.execute("BEGIN TRANSACTION")
        try:
            conn.execute(migration.sql)
            conn.execute(
                "INSERT INTO schema_migrations (version, name) VALUES (?, ?)",
                [migration.version, migration.name],
            )
            conn.execute("COMMIT")
        except duckdb.Error:
            conn.execute("ROLLBACK")
            raise
        now_applied.append(migration.version)
    return now_applied
