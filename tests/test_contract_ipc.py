"""contract.from_ipc: a request body becomes a fully valid table or a ContractError, nothing else.

The seeds are real request bodies (tests/data/ingest/); the mutations are the ones that found a
segfault in libparquet (issue 12): bit flips, truncation, inserted bytes, interesting integers,
duplicated slices. A table that comes back must pass `validate(full=True)` and be writable as
Parquet, which is what the writer does next.
"""

from __future__ import annotations

import io
import struct
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetscope.contract import conform, from_ipc, to_ipc
from fleetscope.errors import ContractError, DecodeBudgetError

DATA = Path(__file__).parent / "data" / "ingest"
SEEDS = {p.name: p.read_bytes() for p in sorted(DATA.glob("seed-*.arrows"))}
INTERESTING = [0, 1, -1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, -(2**31), 2**32 - 1]


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    body = bytearray(SEEDS[draw(st.sampled_from(sorted(SEEDS)))])
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "truncate", "insert", "integer", "duplicate"]))
        at = draw(st.integers(0, max(len(body) - 1, 0)))
        if kind == "flip" and body:
            body[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "truncate":
            del body[at:]
        elif kind == "insert":
            body[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "integer" and len(body) >= at + 4:
            body[at : at + 4] = struct.pack("<I", draw(st.sampled_from(INTERESTING)) & 0xFFFFFFFF)
        elif kind == "duplicate":
            end = draw(st.integers(at, min(len(body), at + 256)))
            body[at:at] = body[at:end]
    return bytes(body)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_from_ipc_gives_a_valid_table_or_the_contract_error(body: bytes) -> None:
    try:
        table = from_ipc(body)
    except ContractError:
        return
    table.validate(full=True)
    try:
        conformed = conform("gpu_samples", table)
    except ContractError:
        return
    pq.write_table(conformed, io.BytesIO())  # what the writer does next; it must not crash


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_every_seed_is_a_valid_body(name: str) -> None:
    assert from_ipc(SEEDS[name]).num_rows > 0


def test_a_decompression_bomb_is_refused_before_it_is_decoded() -> None:
    bomb = (DATA / "bomb-2gb.arrows").read_bytes()  # 121 KB that decode to 2.0 GB
    with pytest.raises(DecodeBudgetError, match=r"decodes to more than 268435456 bytes"):
        from_ipc(bomb)


def test_the_row_budget_is_checked_from_the_metadata() -> None:
    body = to_ipc(pa.table({"x": pa.array(range(1000), pa.int64())}))
    assert from_ipc(body, max_rows=1000).num_rows == 1000
    with pytest.raises(DecodeBudgetError, match=r"more than 999 rows \(server.max_batch_rows\)"):
        from_ipc(body, max_rows=999)


def test_bad_offsets_are_refused_naming_the_stream() -> None:
    """Offsets that go backwards (a negative-length string): refused, not handed to Parquet.

    Arrow's cheap validation passes this array; only the full one catches it."""
    offsets = pa.py_buffer(struct.pack("<3i", 0, 5, 3))
    bad = pa.Array.from_buffers(pa.string(), 2, [None, offsets, pa.py_buffer(b"hello")])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, pa.schema([("host", pa.string())])) as writer:
        writer.write_batch(pa.record_batch([bad], names=["host"]))
    with pytest.raises(ContractError, match=r"body is not an Arrow IPC stream: .*offset"):
        from_ipc(sink.getvalue().to_pybytes())


def test_a_repeated_column_is_refused() -> None:
    table = pa.table([pa.array(["a"]), pa.array(["b"])], names=["host", "host"])
    with pytest.raises(ContractError, match=r"columns \['host'\] appear more than once"):
        conform("gpu_samples", table)
