"""Where the findings and GPU-hours exporter (`analyzers.prometheus_export`) reads its telemetry,
and whether this server is the one that exports, per `server.mode`.

`SOURCES` maps a mode to a factory of an `ExportSource`; the plug-in looks its server's mode up
there and nowhere else branches on the mode:

- `embedded`: the server's own DuckDB warehouse (a cursor on it; the whole history, the read
  range is not needed), and the server always exports: it is the only reader of its warehouse.
- `fleet`: the Iceberg `gpu_samples` and `step_samples` tables (the steps: measured MFU), the
  read range scanned with partition and file pruning (`warehouse.fleet.reader.scan`) into an in-memory DuckDB under the embedded name, as the
  dashboard's fleet source and the analyzers' fleet parts read it; and one exporter per fleet, the
  holder of the `prometheus_export` leadership (`warehouse.leadership`: a PostgreSQL advisory
  lock), since N gateways each exporting the same counters would make `sum()` count them N times
  and multiply the reads.

Reads only: must never create a table, write a file or open a DuckDB file (a gateway has none).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb

    from warehouse.fleet.tables import FleetConfig, FleetTables

# (start_s, end_s) epoch seconds -> a DuckDB connection with `gpu_samples` covering at least that
# range; the caller closes it.
Telemetry = Callable[[float, float], "duckdb.DuckDBPyConnection"]

LEADER_ROLE = "prometheus_export"  # warehouse.leadership's role: one exporter per fleet


@dataclass(frozen=True)
class ExportSource:
    """The telemetry of a server's mode and its say on who exports."""

    telemetry: Telemetry
    leads: Callable[[], bool]  # True while this server should compute and serve the families
    release: Callable[[], None]  # give the role up (at stop)
    # Elected: serve nothing until this server leads and has refreshed once. Not elected (the only
    # server of its warehouse): serve from the start, as the plug-in always did.
    elected: bool = False


def embedded(server: Any) -> ExportSource:
    warehouse = server.warehouse
    return ExportSource(
        telemetry=lambda _start_s, _end_s: warehouse.cursor(),
        leads=lambda: True,
        release=lambda: None,
    )


def fleet(server: Any) -> ExportSource:
    from warehouse.fleet.tables import FleetConfig
    from warehouse.leadership import Leadership

    leadership = Leadership(server.catalog, LEADER_ROLE)
    samples = IcebergSamples(FleetConfig.from_settings(server.settings))
    return ExportSource(
        telemetry=samples.connect,
        leads=leadership.leads,
        release=leadership.release,
        elected=True,
    )


SOURCES: dict[str, Callable[[Any], ExportSource]] = {"embedded": embedded, "fleet": fleet}


class IcebergSamples:
    """The fleet's `gpu_samples` of a time range, in an in-memory DuckDB (one reader thread)."""

    def __init__(self, config: FleetConfig) -> None:
        self.config = config
        self._tables: FleetTables | None = None

    def connect(self, start_s: float, end_s: float) -> duckdb.DuckDBPyConnection:
        from fleetscope.contract import TABLES
        from warehouse.fleet import reader
        from warehouse.fleet.tables import FleetTables

        if self._tables is None:  # opened on the refresh thread, not while the gateway starts
            self._tables = FleetTables(self.config)
        found = {}
        for name in ("gpu_samples", "step_samples"):
            found[name] = TABLES[name].empty_table()
            if self._tables.existing(name) is not None:  # no gateway wrote one yet: empty
                found[name], _ = reader.scan(self._tables, name, _utc(start_s), _utc(end_s))
        return landed(found["gpu_samples"], found["step_samples"])


def landed(rows: Any, steps: Any = None) -> duckdb.DuckDBPyConnection:
    """`rows` (an Arrow table of gpu_samples) and `steps` (of step_samples; none: empty) as the
    fleet source lands a scan: tables of those names in a DuckDB of its own, in memory."""
    import duckdb

    from fleetscope.contract import TABLES

    conn = duckdb.connect(":memory:")
    conn.execute("SET TimeZone = 'UTC'")
    for name, table in (("gpu_samples", rows), ("step_samples", steps)):
        conn.register("_scanned", TABLES[name].empty_table() if table is None else table)
        conn.execute(f"CREATE TABLE {name} AS SELECT * FROM _scanned")
        conn.unregister("_scanned")
    return conn


def _utc(epoch_s: float) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=epoch_s)
