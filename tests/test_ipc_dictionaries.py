"""Dictionary-encoded Arrow bodies count as expanded against the decoded budget (issue 28).

A dictionary is sent once (or grown by deltas) and each row only names an entry, so the bytes a
body decodes to say little about what `conform` builds when it casts the column to plain strings.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from fleetscope.contract import from_ipc, to_ipc
from fleetscope.errors import ContractError, DecodeBudgetError

MIB = 1024 * 1024


def delta_stream(batches: int, rows: int, entry_bytes: int) -> bytes:
    """`batches` record batches, each adding one `entry_bytes` entry by a dictionary delta and
    naming it from all of its `rows` rows."""
    schema = pa.schema([("host", pa.dictionary(pa.int32(), pa.string()))])
    options = pa.ipc.IpcWriteOptions(emit_dictionary_deltas=True, compression="zstd")
    sink = pa.BufferOutputStream()
    entries: list[str] = []
    with pa.ipc.new_stream(sink, schema, options=options) as writer:
        for i in range(batches):
            entries.append(str(i) * entry_bytes)
            indices = pa.array([i] * rows, pa.int32())
            column = pa.DictionaryArray.from_arrays(indices, pa.array(entries))
            writer.write_batch(pa.record_batch([column], schema=schema))
    return bytes(sink.getvalue().to_pybytes())


def test_a_dictionary_named_by_many_rows_counts_as_expanded() -> None:
    host = pa.DictionaryArray.from_arrays(pa.array([0] * 300, pa.int32()), pa.array(["a" * MIB]))
    body = to_ipc(pa.table({"host": host}), compression="zstd")  # a bomb picks the tighter codec
    assert len(body) < 4096  # 300 MiB once cast
    with pytest.raises(DecodeBudgetError, match="once its dictionaries are expanded"):
        from_ipc(body, max_decoded_bytes=256 * MIB)


def test_dictionary_deltas_count_as_expanded() -> None:
    body = delta_stream(batches=8, rows=40, entry_bytes=MIB)  # 8 MiB of entries, 320 MiB cast
    with pytest.raises(DecodeBudgetError, match="once its dictionaries are expanded"):
        from_ipc(body, max_decoded_bytes=64 * MIB)


def test_a_small_dictionary_column_is_read() -> None:
    body = delta_stream(batches=3, rows=10, entry_bytes=8)
    table = from_ipc(body, max_decoded_bytes=MIB)
    assert table.column("host").to_pylist() == ["0" * 8] * 10 + ["1" * 8] * 10 + ["2" * 8] * 10


def test_a_dictionary_nested_in_a_list_is_refused_as_malformed() -> None:
    inner = pa.DictionaryArray.from_arrays(pa.array([0, 0], pa.int32()), pa.array(["x"]))
    nested = pa.ListArray.from_arrays(pa.array([0, 2], pa.int32()), inner)
    body = to_ipc(pa.table({"host": nested}))
    with pytest.raises(ContractError, match="a dictionary nested in") as refused:
        from_ipc(body, max_decoded_bytes=MIB)
    assert not isinstance(refused.value, DecodeBudgetError)  # 400, not 413
