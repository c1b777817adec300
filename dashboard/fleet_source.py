"""The dashboard's telemetry source in fleet mode (`server.mode = fleet`, docs/fleet.md).

Each page's window is read through `warehouse.fleet.reader.scan`: Iceberg prunes whole (day,
cluster) partitions and then files by their ts statistics, so a page of the last hour reads the
files of that hour's day, never every day. The rows land in an in-memory DuckDB under the embedded
reader's names (gpu_samples, host_samples, step_samples), so `dashboard.data` and the accounting run
unchanged.

Roll-ups: fleet upkeep writes one, `gpu_samples_1h` (`warehouse.fleet.upkeep.roll_up`), for each
(day, cluster) partition it drops past `warehouse.raw_retention_days`; it keeps `ts` where the
embedded roll-up has `bucket_ts`. Its rows of partitions with no raw rows left are loaded as the
embedded `gpu_samples_1h`, so a long window counts the dropped days as the embedded dashboard
counts its rolled-up days. A dropped day's roll-up is complete (unlike the embedded newest bucket,
which may still fill): one marker row at the end of the newest rolled-up day, with no samples,
tells the accounting (`analyzers.accounting.usage`, which never reads a roll-up's newest bucket)
that every bucket before it is whole. The marker is never counted.

The newest sample comes from the data files' ts upper bounds (manifests only). What this module
adds to `warehouse.fleet.reader`: reading without creating (the reader's `FleetTables.table`
creates a missing table; a dashboard must not), the newest sample from metadata, and the roll-up
read. It must never write a table, a file or a snapshot.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Hashable, Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

from analyzers.run.window import bucket_for
from fleetscope.contract import TABLES
from fleetscope.errors import ConfigError, SourceUnavailableError
from warehouse.fleet import reader
from warehouse.fleet.rollup import ROLLUP_1H
from warehouse.fleet.tables import FleetConfig, FleetTables
from warehouse.fleet.upkeep import EPOCH_DAY
from warehouse.read.rollups import ROLLUP_SCHEMA
from warehouse.storage import schema

if TYPE_CHECKING:
    import sqlalchemy
    from pyiceberg.table import Table

    from fleetscope.settings import Settings

HOUR_S = 3600


def _ts_filter(start: datetime, end: datetime) -> str:
    return f"ts >= '{start.isoformat()}' AND ts < '{end.isoformat()}'"


class FleetSource:
    """Iceberg tables through pruned scans; the catalog in PostgreSQL (`warehouse.catalog_url`)."""

    windowed = True

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.config = FleetConfig.from_settings(settings)  # a clear error when not on PostgreSQL
        self._tables: FleetTables | None = None
        # pyiceberg's Table objects are refreshed in place; Streamlit serves sessions from threads.
        self._lock = threading.Lock()
        # What the newest `connect` planned per table: files and rows (the pruning, for tests).
        self.last_scans: dict[str, reader.ScanStats] = {}

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """One reader at a time; an unreachable catalog or object store, or a dashboard installed
        without the fleet extra, becomes the project's error, which the app shows as a message
        (dashboard/app.py), not a traceback."""
        from sqlalchemy.exc import DBAPIError

        with self._lock:
            try:
                yield
            except ModuleNotFoundError as exc:
                if not (exc.name or "").startswith("pyiceberg"):
                    raise
                raise ConfigError(
                    "server.mode = fleet reads Iceberg tables through pyiceberg: install the fleet "
                    "extra where the dashboard runs (pip install 'fleetscope[fleet]')"
                ) from exc
            except (OSError, DBAPIError) as exc:
                raise SourceUnavailableError(
                    f"fleet tables unreachable (catalog {self.config.catalog_url.split('@')[-1]}, "
                    f"storage {self.config.s3_endpoint or self.config.warehouse_uri}): "
                    f"{str(exc).splitlines()[0]}"
                ) from exc

    @property
    def tables(self) -> FleetTables:
        if self._tables is None:
            self._tables = FleetTables(self.config)
        return self._tables

    def _existing(self, name: str) -> Table | None:
        """The Iceberg table `name`, refreshed; None when no gateway (or upkeep) has created it."""
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

        try:
            return self.tables.catalog.load_table(self.tables.identifier(name))
        except (NoSuchTableError, NoSuchNamespaceError):
            return None

    def scope(self, start: datetime | None, end: datetime | None) -> tuple[datetime, ...]:
        if start is None or end is None:
            raise ValueError("a fleet-mode read needs its window (partition pruning)")
        return (start, end)

    def connect(self, scope: tuple[datetime, ...]) -> duckdb.DuckDBPyConnection:
        start, end = scope
        conn = duckdb.connect(":memory:")
        conn.execute("SET TimeZone = 'UTC'")
        with self._reading():
            for name, table_schema in TABLES.items():
                rows = table_schema.empty_table()
                if self._existing(name) is not None:
                    rows, self.last_scans[name] = reader.scan(self.tables, name, start, end)
                _create(conn, name, rows)
            self._load_rollup(conn, start, end)
        return conn

    def _load_rollup(self, conn: duckdb.DuckDBPyConnection, start: datetime, end: datetime) -> None:
        """The upkeep's hourly roll-up rows of partitions whose raw rows are gone, as the embedded
        `gpu_samples_1h` (bucket_ts), with the marker row (module docstring)."""
        rollup = self._existing(ROLLUP_1H)
        if rollup is None:
            return
        rolled = rollup.scan(row_filter=_ts_filter(start, end)).to_arrow()
        raw = self._existing("gpu_samples")
        parts = _partitions(raw, _ts_filter(start, end)) if raw is not None else set()
        kept = pa.table(
            {
                "day": pa.array([d for d, _ in parts], pa.int32()),
                "cluster": pa.array([c for _, c in parts], pa.string()),
            }
        )
        conn.execute(schema.create_table_sql(ROLLUP_1H, ROLLUP_SCHEMA))
        conn.register("_rolled", rolled)
        conn.register("_raw_parts", kept)
        # A table the upkeep has not yet evolved lacks the sums and counts: they stay null.
        have = set(rolled.column_names)
        listed = ", ".join(
            f.name for f in ROLLUP_SCHEMA if f.name != "bucket_ts" and f.name in have
        )
        conn.execute(
            f"INSERT INTO {ROLLUP_1H} (bucket_ts, {listed}) SELECT ts AS bucket_ts, {listed} "
            "FROM _rolled "
            "WHERE (datediff('day', DATE '1970-01-01', CAST(ts AS DATE)), coalesce(cluster, '')) "
            "NOT IN (SELECT day, coalesce(cluster, '') FROM _raw_parts)"
        )
        conn.unregister("_rolled")
        conn.unregister("_raw_parts")
        conn.execute(
            f"INSERT INTO {ROLLUP_1H} (bucket_ts, cluster, host, gpu_index, job_id, samples) "
            f"SELECT CAST(max(bucket_ts) AS DATE) + INTERVAL 1 DAY, NULL, '', 0, NULL, 0 "
            f"FROM {ROLLUP_1H} HAVING count(*) > 0"
        )

    def version(self) -> Hashable:
        """Moves every `dashboard.cache_ttl_s`: asking the catalog whether a table has a new
        snapshot costs a round trip, as much as reading the newest sample."""
        return int(time.monotonic() // max(self.settings.dashboard.cache_ttl_s, 1.0))

    def latest_sample(self) -> datetime | None:
        with self._reading():
            table = self._existing("gpu_samples")
            if table is None:
                return None
            return _newest_ts(table)

    def catalog_engine(self) -> sqlalchemy.Engine:
        import sqlalchemy

        return sqlalchemy.create_engine(self.config.catalog_url)

    def missing(self, start: datetime, end: datetime) -> list[str]:
        namespace = self.config.namespace
        notes = []
        window = _ts_filter(start, end)
        with self._reading():
            for name in TABLES:
                if self._existing(name) is None:
                    notes.append(
                        f"The fleet has no Iceberg table {namespace}.{name} yet (no gateway has "
                        "committed a batch of it): what it would show is empty."
                    )
            raw = self._existing("gpu_samples")
            if raw is None:
                return notes
            raw_parts = _partitions(raw, window)
            rollup = self._existing(ROLLUP_1H)
            rolled = _partitions(rollup, window) - raw_parts if rollup is not None else set()
            oldest = min((d for d, _ in _partitions(raw, None)), default=None)
        if rolled and (bucket_for(end - start) % HOUR_S or start.timestamp() % HOUR_S):
            first, last = (_day(d) for d in (min(rolled)[0], max(rolled)[0]))
            notes.append(
                f"{first:%Y-%m-%d} to {last:%Y-%m-%d} are kept only as hourly roll-ups "
                f"({namespace}.{ROLLUP_1H}, raw samples past warehouse.raw_retention_days are "
                "dropped): a window of 7 days or more shows them."
            )
        retained = end - timedelta(days=self.settings.warehouse.raw_retention_days)
        if rollup is None and oldest is not None and start < min(_day(oldest), retained):
            notes.append(
                f"No raw samples before {_day(oldest):%Y-%m-%d}, and the fleet has no hourly "
                f"roll-up table {namespace}.{ROLLUP_1H} yet (fleet upkeep writes it when it drops "
                "days past warehouse.raw_retention_days): older days of this window show nothing."
            )
        return notes

    def no_samples(self) -> str:
        return (
            f"The fleet's Iceberg tables ({self.config.namespace}, {self.config.warehouse_uri}) "
            "hold no GPU samples yet: start gateways (`fleetscope server --mode fleet`) and agents."
        )


def _create(conn: duckdb.DuckDBPyConnection, name: str, rows: pa.Table) -> None:
    conn.register(f"_arrow_{name}", rows)
    conn.execute(f"CREATE TABLE {name} AS SELECT * FROM _arrow_{name}")
    conn.unregister(f"_arrow_{name}")


def _day(days_since_epoch: int) -> datetime:
    return datetime.combine(EPOCH_DAY + timedelta(days=days_since_epoch), datetime.min.time(), UTC)


def _partitions(table: Table, row_filter: str | None) -> set[tuple[int, str | None]]:
    """(day since epoch, cluster) of the data files a scan with `row_filter` plans (manifests only)."""
    planned = table.scan(row_filter=row_filter) if row_filter else table.scan()
    found = set()
    for task in planned.plan_files():
        record = task.file.partition
        found.add((int(record[0]), None if record[1] is None else str(record[1])))
    return found


def _newest_ts(table: Table) -> datetime | None:
    """The newest ts of `table` from its data files' upper bounds (Iceberg keeps timestamps'
    bounds whole); a file without bounds has its rows read instead."""
    from pyiceberg.conversions import from_bytes
    from pyiceberg.types import TimestamptzType

    field_id = table.schema().find_field("ts").field_id
    newest_us: int | None = None
    unbounded_days: list[int] = []
    for task in table.scan().plan_files():
        bound = (task.file.upper_bounds or {}).get(field_id)
        if bound is None:
            unbounded_days.append(int(task.file.partition[0]))
            continue
        value = int(from_bytes(TimestamptzType(), bound))
        newest_us = value if newest_us is None else max(newest_us, value)
    if unbounded_days:  # read only the newest day such a file holds, never every day
        day = EPOCH_DAY + timedelta(days=max(unbounded_days))
        since = datetime.combine(day, datetime.min.time(), UTC)
        rows = table.scan(row_filter=f"ts >= '{since.isoformat()}'", selected_fields=("ts",))
        column = rows.to_arrow().column("ts")
        if len(column):
            value = int(pa.compute.max(column).cast(pa.int64()).as_py())
            newest_us = value if newest_us is None else max(newest_us, value)
    return None if newest_us is None else datetime.fromtimestamp(newest_us / 1e6, tz=UTC)
