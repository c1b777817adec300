"""What the ingest routes and /metrics need from a writer, embedded or fleet gateway.

Why a protocol: the HTTP layer (warehouse.ingest.server) is shared by the embedded server, whose writer
owns a DuckDB file, and by fleet gateways, whose writer commits to Iceberg (warehouse.fleet).
"""

from __future__ import annotations

from typing import Protocol

import pyarrow as pa

from warehouse.ingest.batch_queue import Part, Ticket
from warehouse.storage.writer import WriterStats


class BatchSink(Protocol):
    stats: WriterStats

    @property
    def queued_rows(self) -> int: ...

    @property
    def log_fsyncs(self) -> int: ...

    def submit(
        self, table: str, data: pa.Table, batch_id: str, agent: str = "", agent_version: str = ""
    ) -> tuple[Ticket, bool]: ...

    def submit_parts(
        self, table: str, data: pa.Table, parts: tuple[Part, ...], agent: str = ""
    ) -> tuple[Ticket, bool]: ...
