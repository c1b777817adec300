"""Collects rows per table and seals them into Arrow IPC batches for the spool.

A batch is sealed when it reaches agent.batch_max_rows or its oldest row has waited
agent.ship_interval_s; that bounds both memory (at most one open batch per table) and latency.
Sealing builds the Arrow table directly in the contract's schema (so every type is checked by
Arrow) and checks the required columns for nulls, so a bad row fails here, on the host, with a
clear ContractError, not later at ingest. (Not `contract.conform`: casting a table that already has
the schema costs more than the rest of sealing, measured in bench/agent.py.)

Must never: hold more than `max_rows` rows of one table in memory.
"""

from __future__ import annotations

import operator

import pyarrow as pa

from collector.spool import Spool, SpooledBatch
from fleetscope.contract import TABLES, to_ipc
from fleetscope.contract import (
    WIRE_CODEC as WIRE_CODEC,  # what the agent ships; benches import it here
)
from fleetscope.errors import ContractError

_ALL_COLUMNS = {name: operator.itemgetter(*schema.names) for name, schema in TABLES.items()}
# The columns that may hold no null, per table: checked by name (4 of gpu_samples' 40), not by
# walking the schema on every seal.
_REQUIRED = {
    name: tuple(f.name for f in schema if not f.nullable) for name, schema in TABLES.items()
}


def rows_to_ipc(table: str, rows: list[dict[str, object]]) -> bytes:
    """Rows (dicts keyed by contract column; missing keys are nulls) -> one IPC stream body.

    Rows that carry every column (normalize.py's do) are turned into columns by one C-level
    transpose; others column by column with `get`."""
    schema = TABLES[table]
    try:
        transposed = list(zip(*map(_ALL_COLUMNS[table], rows), strict=True))
    except KeyError:  # some row lacks a column: gather column by column
        transposed = [tuple(row.get(name) for row in rows) for name in schema.names]
    if not rows:
        transposed = [() for _ in schema.names]
    columns = {name: list(col) for name, col in zip(schema.names, transposed, strict=True)}
    if "extra" in columns:  # a map column takes dicts; anything else is no map
        columns["extra"] = [
            extra if isinstance(extra, dict) else None for extra in columns["extra"]
        ]
    try:
        batch = pa.Table.from_pydict(columns, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ContractError(f"{table}: rows do not fit the contract: {exc}") from exc
    for name in _REQUIRED[table]:
        if batch.column(name).null_count:
            raise ContractError(f"{table}.{name}: nulls in a required column")
    return to_ipc(batch)


class Batcher:
    def __init__(self, spool: Spool, *, max_rows: int, max_age_s: float) -> None:
        self.spool = spool
        self.max_rows = max_rows
        self.max_age_s = max_age_s
        self._rows: dict[str, list[dict[str, object]]] = {}
        self._opened: dict[str, float] = {}

    def add(self, table: str, rows: list[dict[str, object]], now: float) -> list[SpooledBatch]:
        full: list[tuple[str, list[dict[str, object]]]] = []
        pending = self._rows.setdefault(table, [])
        if not pending:
            self._opened[table] = now
        for row in rows:
            pending.append(row)
            if len(pending) >= self.max_rows:
                full.append((table, pending))
                pending = self._rows[table] = []
                self._opened[table] = now
        return self._seal(full) + self.due(now)

    def due(self, now: float) -> list[SpooledBatch]:
        """Seal every table whose oldest row has waited max_age_s (one spool write for all)."""
        return self._seal(
            [
                (table, self._take(table))
                for table, rows in self._rows.items()
                if rows and now - self._opened[table] >= self.max_age_s
            ]
        )

    def flush(self) -> list[SpooledBatch]:
        return self._seal(
            [(table, self._take(table)) for table, rows in self._rows.items() if rows]
        )

    def _take(self, table: str) -> list[dict[str, object]]:
        rows = self._rows[table]
        self._rows[table] = []
        return rows

    def _seal(self, tables: list[tuple[str, list[dict[str, object]]]]) -> list[SpooledBatch]:
        if not tables:
            return []
        return self.spool.put_many([(table, rows_to_ipc(table, rows)) for table, rows in tables])
