"""Migrations: idempotent, in step with the contract, refusing drift and newer databases."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from fleetscope.contract import TABLES
from fleetscope.errors import ConfigError
from warehouse.migrations import applied, available, migrate
from warehouse.storage import schema
from warehouse.storage.writer import open_database


def test_migrations_apply_once(tmp_path: Path) -> None:
    conn = duckdb.connect(str(tmp_path / "t.duckdb"))
    assert migrate(conn) == [m.version for m in available()]
    assert migrate(conn) == []
    assert applied(conn) == [m.version for m in available()]


@pytest.mark.parametrize("table", sorted(TABLES))
def test_migrated_tables_match_the_contract(tmp_path: Path, table: str) -> None:
    conn = duckdb.connect(str(tmp_path / "t.duckdb"))
    migrate(conn)
    assert schema.describe(conn, table) == schema.columns(TABLES[table])


def test_drift_from_the_contract_is_refused_with_the_column(tmp_path: Path) -> None:
    path = tmp_path / "t.duckdb"
    conn = duckdb.connect(str(path))
    migrate(conn)
    conn.execute("ALTER TABLE host_samples DROP COLUMN load1")
    conn.close()
    with pytest.raises(ConfigError, match="telemetry table host_samples differs"):
        open_database(path)


def test_a_database_from_a_newer_build_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.duckdb"
    conn = duckdb.connect(str(path))
    migrate(conn)
    conn.execute("INSERT INTO schema_migrations (version, name) VALUES (99, 'future')")
    with pytest.raises(ConfigError, match="schema version 99, newer than this build"):
        migrate(conn)


def test_a_second_writer_process_gets_a_clear_error(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "t.duckdb"
    holder = open_database(path)
    try:
        code = (
            "import sys\nfrom pathlib import Path\nfrom warehouse.storage.writer import open_database\n"
            "from fleetscope.errors import ConfigError\n"
            "try:\n    open_database(Path(sys.argv[1]))\n"
            "except ConfigError as exc:\n    print(exc)\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code, str(path)],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parents[2],
        ).stdout
    finally:
        holder.close()
    assert out.startswith(f"telemetry database {path} is in use by another process")
    assert "read through warehouse.read.reader instead" in out
