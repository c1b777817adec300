"""The fast loader inflates with zlib-ng when it is installed (the `server` extra) and with stdlib
gzip when it is not: both read every golden trace to the same columns, and with both the decoder names a corrupt
stream."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from analyzers.traces import trace_text
from analyzers.traces.load import load_raw_trace
from fleetscope.errors import CorruptTraceError
from tests.analyzers.traces.test_traces_load_fast import differences, fast_only
from tests.analyzers.traces.trace_paths import ALL_TRACES

GOLDEN = [f for d in ALL_TRACES for f in sorted(d.glob("*.gz"))]


def test_zlib_ng_is_the_inflater_where_the_server_extra_is_installed() -> None:
    from zlib_ng import gzip_ng

    assert trace_text._open_gzip is gzip_ng.open


@pytest.mark.parametrize("trace_file", GOLDEN, ids=lambda p: p.parent.name)
def test_stdlib_gzip_reads_the_same_columns(
    trace_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_zlib_ng = fast_only(trace_file)
    monkeypatch.setattr(trace_text, "_open_gzip", gzip.GzipFile)
    with_stdlib = fast_only(trace_file)
    assert differences(with_zlib_ng, with_stdlib) == []


@pytest.mark.parametrize("inflater", ["zlib-ng", "stdlib"])
def test_a_corrupt_stream_is_named_by_the_decoder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inflater: str
) -> None:
    if inflater == "stdlib":
        monkeypatch.setattr(trace_text, "_open_gzip", gzip.GzipFile)
    good = gzip.compress(b'{"traceEvents": [' + b'{"ph": "X"},' * 2000 + b"{}]}")
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0xFF  # a flipped byte in the deflate stream
    path = tmp_path / "corrupt.json.gz"
    path.write_bytes(bytes(bad))
    with pytest.raises(CorruptTraceError, match=r"corrupt\.json\.gz: not a valid gzip file"):
        load_raw_trace(path)
