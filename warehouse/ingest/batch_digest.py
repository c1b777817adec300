"""The content digest that binds a batch id to what it carries (issue 28: no silent drop).

Why: the ledger dedups by batch id, so a reused id with another body was answered `duplicate:
true` with the first copy's row count and the second body dropped while its client believed it
stored. The writers keep this digest next to each id: an identical retry stays an idempotent
duplicate; other content, or the same id for another table, is refused 409 Conflict (the agent
dead-letters it with a log line). The digest is SHA-256 over the table name, the column names and
types, and every buffer of every column as decoded from the request: a retry of the same bytes
decodes to the same buffers. Cost: one pass over the batch's bytes on the request's thread. This
module must never touch the writer's queue or a database.
"""

from __future__ import annotations

import hashlib

import pyarrow as pa

__all__ = ["CONFLICT_STATUS", "conflict_message", "content_digest"]

CONFLICT_STATUS = 409


def content_digest(table: str, data: pa.Table) -> str:
    """Hex SHA-256 of `data` as submitted for `table` (the first 32 hex digits are kept)."""
    digest = hashlib.sha256(table.encode())
    digest.update(str(data.schema).encode())
    digest.update(data.num_rows.to_bytes(8, "little"))
    for column in data.columns:
        for chunk in column.chunks:
            _update_array(digest, chunk)
    return digest.hexdigest()[:32]


def _update_array(digest: hashlib._Hash, array: pa.Array) -> None:
    digest.update(b"|%d:%d|" % (array.offset, len(array)))
    for buffer in array.buffers():
        digest.update(b"-" if buffer is None else memoryview(buffer))
    dictionary = getattr(array, "dictionary", None)
    if isinstance(dictionary, pa.Array):
        _update_array(digest, dictionary)


def conflict_message(batch_id: str, first_table: str, table: str) -> str:
    """Why a reused batch id is refused, naming what differs."""
    if first_table != table:
        return (
            f"batch id {batch_id} was already used for table {first_table}, not {table}; "
            "a batch id names one batch of one table"
        )
    return (
        f"batch id {batch_id} was already stored with other content; a batch id names one "
        "batch: send new data under a new id"
    )
