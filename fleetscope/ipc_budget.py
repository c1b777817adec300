"""What an Arrow IPC stream will cost once decoded, read from its message metadata alone.

Why: a request body is compressed (zstd buffers), so `server.max_body_bytes` bounds only what
arrives, not what decoding allocates: a 65 KB body can decompress to 2 GiB (issue 12). Arrow's
reader decompresses a whole record batch before anyone can look at it, so the budget has to be
checked before decoding: every compressed IPC buffer starts with its uncompressed length as a
little-endian int64 (-1: stored raw), and the record batch's flatbuffer metadata says where each
buffer lies in the message body. `decoded_cost` walks the messages with Arrow's framing reader
(which verifies each flatbuffer), reads those lengths and row counts, and raises BudgetError the
moment the running total passes the budget, before a single buffer is decompressed.

Layout read here (format/Message.fbs, format/Schema.fbs): Message {version, header_type, header,
bodyLength, custom_metadata}; RecordBatch {length, nodes, buffers: [Buffer{offset, length}],
compression, ...}; DictionaryBatch {id, data: RecordBatch, isDelta}. Must never decode a buffer,
and never trust an offset it has not bounds-checked against the body.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import pyarrow as pa

_RECORD_BATCH = "record batch"
_DICTIONARY_BATCH = "dictionary batch"


class BudgetError(ValueError):
    """The stream is over a budget, or its metadata does not describe its body."""


@dataclass(frozen=True)
class DecodedCost:
    """What decoding the stream would allocate for buffers, and how many rows it holds."""

    decoded_bytes: int
    rows: int
    batches: int


class _Table:
    """One flatbuffer table: fields by slot, every read bounds-checked by struct."""

    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf = buf
        self.pos = pos
        self.vtable = pos - struct.unpack_from("<i", buf, pos)[0]
        self.vtable_len = struct.unpack_from("<H", buf, self.vtable)[0]

    def _offset(self, slot: int) -> int:
        at = 4 + 2 * slot
        if at + 2 > self.vtable_len:
            return 0
        return int(struct.unpack_from("<H", self.buf, self.vtable + at)[0])

    def int64(self, slot: int) -> int:
        off = self._offset(slot)
        return int(struct.unpack_from("<q", self.buf, self.pos + off)[0]) if off else 0

    def table(self, slot: int) -> _Table | None:
        off = self._offset(slot)
        if not off:
            return None
        at = self.pos + off
        return _Table(self.buf, at + struct.unpack_from("<I", self.buf, at)[0])

    def struct_vector(self, slot: int, fmt: str) -> list[tuple[int, ...]]:
        off = self._offset(slot)
        if not off:
            return []
        at = self.pos + off
        start = at + struct.unpack_from("<I", self.buf, at)[0]
        (count,) = struct.unpack_from("<I", self.buf, start)
        size = struct.calcsize(fmt)
        if start + 4 + count * size > len(self.buf):
            raise BudgetError("IPC metadata: a vector runs past its message")
        return [struct.unpack_from(fmt, self.buf, start + 4 + i * size) for i in range(count)]


def _batch_cost(batch: _Table, body: bytes) -> tuple[int, int]:
    """(decoded buffer bytes, rows) of one RecordBatch table against its body."""
    rows = batch.int64(0)
    if rows < 0:
        raise BudgetError(f"IPC record batch declares {rows} rows")
    compressed = batch.table(3) is not None
    total = 0
    for offset, length in batch.struct_vector(2, "<qq"):
        if offset < 0 or length < 0 or offset + length > len(body):
            raise BudgetError(
                f"IPC buffer at {offset} of {length} bytes lies outside the {len(body)}-byte body"
            )
        if not compressed or length == 0:
            total += length
            continue
        if length < 8:
            raise BudgetError("IPC compressed buffer is shorter than its length prefix")
        (decoded,) = struct.unpack_from("<q", body, offset)
        if decoded < -1:
            raise BudgetError(f"IPC compressed buffer declares {decoded} decoded bytes")
        total += length - 8 if decoded == -1 else decoded
    return total, rows


def decoded_cost(body: bytes, *, max_decoded_bytes: int, max_rows: int) -> DecodedCost:
    """Walk the stream's messages; BudgetError as soon as a budget is passed.

    Raises pa.ArrowInvalid (or another pa.ArrowException) when the framing itself is broken;
    the caller turns both into the contract's error.
    """
    total = rows = batches = 0
    reader = pa.ipc.MessageReader.open_stream(pa.py_buffer(body))
    while True:
        try:
            message = reader.read_next_message()
        except StopIteration:
            break
        if message.type not in (_RECORD_BATCH, _DICTIONARY_BATCH):
            continue
        meta = message.metadata.to_pybytes()
        message_body = message.body.to_pybytes() if message.body is not None else b""
        try:
            root = _Table(meta, struct.unpack_from("<I", meta, 0)[0])
            header = root.table(2)
            if header is not None and message.type == _DICTIONARY_BATCH:
                header = header.table(1)
            if header is None:
                raise BudgetError(f"IPC {message.type} message has no header")
            cost, batch_rows = _batch_cost(header, message_body)
        except struct.error as exc:
            raise BudgetError(f"IPC {message.type} metadata is malformed: {exc}") from exc
        total += cost
        batches += 1
        if message.type == _RECORD_BATCH:
            rows += batch_rows
        if total > max_decoded_bytes:
            raise BudgetError(
                f"body decodes to more than {max_decoded_bytes} bytes "
                "(server.max_decoded_bytes); send smaller batches"
            )
        if rows > max_rows:
            raise BudgetError(
                f"body holds more than {max_rows} rows (server.max_batch_rows); "
                "send smaller batches"
            )
    return DecodedCost(total, rows, batches)


def _is_variable(type_: pa.DataType) -> bool:
    return bool(
        pa.types.is_binary(type_)
        or pa.types.is_string(type_)
        or pa.types.is_large_binary(type_)
        or pa.types.is_large_string(type_)
    )


def _has_dictionary(type_: pa.DataType) -> bool:
    if pa.types.is_dictionary(type_):
        return True
    return any(_has_dictionary(type_.field(i).type) for i in range(type_.num_fields))


def materialized_cost(table: pa.Table, *, max_decoded_bytes: int) -> int:
    """Bytes the dictionary-encoded columns of a decoded stream grow to once cast to plain
    values (what `contract.conform` does); BudgetError past the budget, before any cast.

    Why: a dictionary is sent once and each row only names an entry, so a 1.6 MB body whose
    dictionary holds one 1 MB string and whose 300 rows all name it decoded within budget and
    then became 300 MB when conformed (issue 28). A top-level dictionary column costs the sum
    of its rows' entry lengths (computed by Arrow, no copy); a dictionary nested inside a list,
    struct or map is not something any fleetscope client sends, and is refused as malformed.
    """
    import pyarrow.compute as pc

    total = 0
    schema = table.schema
    # Only the column types are looked at first: fetching every column and field object was
    # most of this function's cost for a batch without dictionaries (what agents send).
    for at, type_ in enumerate(schema.types):
        if not (pa.types.is_dictionary(type_) or type_.num_fields) or not _has_dictionary(type_):
            continue
        field = schema.field(at)
        if not pa.types.is_dictionary(type_):
            raise pa.ArrowInvalid(f"column {field.name!r}: a dictionary nested in {type_}")
        value_type = type_.value_type
        for chunk in table.column(at).chunks:
            if _is_variable(value_type):
                lengths = pc.binary_length(chunk.dictionary)
                taken = pc.sum(pc.take(lengths, chunk.indices)).as_py() or 0
                total += int(taken) + 8 * len(chunk)
            elif pa.types.is_primitive(value_type):
                total += len(chunk) * max(1, value_type.bit_width // 8)
            else:
                raise pa.ArrowInvalid(f"column {field.name!r}: a dictionary of {value_type}")
            if total > max_decoded_bytes:
                raise BudgetError(
                    f"body decodes to more than {max_decoded_bytes} bytes once its dictionaries "
                    "are expanded (server.max_decoded_bytes); send smaller batches"
                )
    return total
