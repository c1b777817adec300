"""Telemetry for a command that reads a time window, in either deployment mode (issue 30).

`open_window(settings, start, end)` is a DuckDB connection holding gpu_samples, host_samples and
step_samples under the embedded reader's names for at least [start, end), from the mode's registry
entry (`WINDOW_READERS`, keyed by `server.mode`): embedded, the views over the live segments
(`warehouse.read.reader`, every day at once; the roll-ups too); fleet, a pruned Iceberg scan of the
window (`warehouse.fleet.reader`). `sample_days` lists the UTC days holding GPU samples from
metadata alone (the manifest, or the Iceberg partitions), and `job_span` finds a job's first and
last sample, so a command that does not know its window yet reads only the job's days.

Before this module, `fleetscope job`, `report weekly` and `plan sharing` read the embedded views
whatever the mode: in fleet mode they found no samples and said so as if it were a fact ("a
CPU-only process", 0.0 GPU-hours, 0 GPUs). A mode missing from the registry is a clear error.

This module must never write: a fleet table that does not exist yet reads as empty, it is not
created.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING

from fleetscope.contract import TABLES
from fleetscope.errors import ConfigError

if TYPE_CHECKING:
    import duckdb
    from pyiceberg.table import Table

    from fleetscope.settings import Settings
    from warehouse.fleet.tables import FleetTables


class _Embedded:
    def open(self, settings: Settings, start: datetime, end: datetime) -> duckdb.DuckDBPyConnection:
        from warehouse.read.reader import connect

        return connect(settings)

    def sample_days(self, settings: Settings) -> list[date]:
        from warehouse.storage.paths import WarehousePaths
        from warehouse.storage.segments import read_manifest

        manifest = read_manifest(WarehousePaths.from_settings(settings).segments_dir)
        return sorted(date.fromisoformat(day) for day in manifest.by_date("gpu_samples"))

    def job_span(self, settings: Settings, job_id: str) -> tuple[datetime, datetime] | None:
        from warehouse.read.reader import connect

        conn = connect(settings)
        try:
            row = conn.execute(
                "SELECT epoch_ms(min(ts)), epoch_ms(max(ts)) FROM gpu_samples WHERE job_id = ?",
                [job_id],
            ).fetchone()
        finally:
            conn.close()
        return _span(row)


class _Fleet:
    def _tables(self, settings: Settings) -> FleetTables:
        from warehouse.fleet.tables import FleetConfig, FleetTables

        return FleetTables(FleetConfig.from_settings(settings))

    def _existing(self, tables: FleetTables, name: str) -> Table | None:
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

        try:
            return tables.catalog.load_table(tables.identifier(name))
        except (NoSuchTableError, NoSuchNamespaceError):
            return None

    def open(self, settings: Settings, start: datetime, end: datetime) -> duckdb.DuckDBPyConnection:
        import duckdb

        from warehouse.fleet.reader import scan
        from warehouse.storage import schema

        tables = self._tables(settings)
        conn = duckdb.connect(":memory:")
        conn.execute("SET TimeZone = 'UTC'")
        for name, table_schema in TABLES.items():
            if self._existing(tables, name) is None:
                conn.execute(schema.create_table_sql(name, table_schema))
                continue
            rows, _stats = scan(tables, name, start, end)
            conn.register(f"_iceberg_{name}", rows)
            conn.execute(f"CREATE TABLE {name} AS SELECT * FROM _iceberg_{name}")
            conn.unregister(f"_iceberg_{name}")
        return conn

    def sample_days(self, settings: Settings) -> list[date]:
        from warehouse.fleet.upkeep import EPOCH_DAY

        table = self._existing(self._tables(settings), "gpu_samples")
        if table is None:
            return []
        days = {int(task.file.partition[0]) for task in table.scan().plan_files()}
        return sorted(EPOCH_DAY + timedelta(days=d) for d in days)

    def job_span(self, settings: Settings, job_id: str) -> tuple[datetime, datetime] | None:
        import pyarrow.compute as pc

        table = self._existing(self._tables(settings), "gpu_samples")
        if table is None:
            return None
        quoted = job_id.replace("'", "''")
        planned = table.scan(row_filter=f"job_id == '{quoted}'", selected_fields=("ts",))
        first_us: int | None = None
        last_us: int | None = None
        for batch in planned.to_arrow_batch_reader():
            if batch.num_rows == 0:
                continue
            low, high = pc.min_max(batch.column(0)).values()
            lo, hi = int(low.value), int(high.value)
            first_us = lo if first_us is None else min(first_us, lo)
            last_us = hi if last_us is None else max(last_us, hi)
        if first_us is None or last_us is None:
            return None
        return _span((first_us // 1000, last_us // 1000))


def _span(row: tuple[object, ...] | None) -> tuple[datetime, datetime] | None:
    """[first, last + 1 ms) of a (first ms, last ms) row; None when there is no sample."""
    if row is None or row[0] is None or row[1] is None:
        return None
    first, last = (datetime.fromtimestamp(int(str(v)) / 1000, tz=UTC) for v in row[:2])
    return first, last + timedelta(milliseconds=1)


WINDOW_READERS: Mapping[str, Callable[[], _Embedded | _Fleet]] = {
    "embedded": _Embedded,
    "fleet": _Fleet,
}


# Modes whose connection holds only its window: a command that reads "everything" (a job) must
# find its window first. The embedded views hold every day at once.
WINDOWED: frozenset[str] = frozenset({"fleet"})


def _reader(settings: Settings) -> _Embedded | _Fleet:
    mode = settings.server.mode
    if mode not in WINDOW_READERS:
        raise ConfigError(f"server.mode must be one of {', '.join(WINDOW_READERS)}, got {mode!r}")
    return WINDOW_READERS[mode]()


def open_window(settings: Settings, start: datetime, end: datetime) -> duckdb.DuckDBPyConnection:
    """The contract tables for at least [start, end) (module docstring)."""
    return _reader(settings).open(settings, start, end)


def sample_days(settings: Settings) -> list[date]:
    """The UTC days holding GPU samples, oldest first, from metadata alone."""
    return _reader(settings).sample_days(settings)


def job_span(settings: Settings, job_id: str) -> tuple[datetime, datetime] | None:
    """[first sample, last sample + 1 ms) of `job_id`'s GPU samples; None for a job without any."""
    return _reader(settings).job_span(settings, job_id)


def open_job(settings: Settings, job_id: str) -> duckdb.DuckDBPyConnection:
    """The contract tables holding every sample of `job_id`: in a windowed mode only the job's days
    (`job_span`; an empty window for a job without samples), else every day at once."""
    span = job_span(settings, job_id) if settings.server.mode in WINDOWED else None
    if span is None:
        now = datetime.now(UTC)
        span = (now, now)
    return open_window(settings, *span)
