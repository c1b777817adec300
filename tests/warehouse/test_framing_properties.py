"""Property tests of the parsers in front of the handlers: framing headers and the streaming
remote_write decoder never raise anything but the contract's errors, whatever the bytes."""

from __future__ import annotations

import contextlib
import email.message

import pytest
import snappy
from hypothesis import given
from hypothesis import strategies as st

from fleetscope.errors import ContractError, IngestError
from warehouse.ingest.framing import ascii_int, body_length
from warehouse.prometheus.prompb import (
    DecodeLimits,
    Series,
    decode_write_request,
    encode_write_request,
)

LATIN1 = st.text(st.characters(min_codepoint=0, max_codepoint=255), max_size=24)


@given(LATIN1)
def test_ascii_int_reads_only_ascii_digits(raw: str) -> None:
    value = ascii_int(raw)
    stripped = raw.strip(" \t")
    if value is None:
        assert not (stripped and len(stripped) <= 18 and all("0" <= c <= "9" for c in stripped))
    else:
        assert value == int(stripped) and all("0" <= c <= "9" for c in stripped)


@given(st.lists(st.tuples(st.sampled_from(["Content-Length", "Transfer-Encoding"]), LATIN1),
                max_size=4))  # fmt: skip
def test_body_length_is_a_length_none_or_a_400(headers: list[tuple[str, str]]) -> None:
    message = email.message.Message()
    for name, value in headers:
        message[name] = value
    try:
        length = body_length(message)
    except IngestError as exc:
        assert exc.status == 400
    else:
        assert (length is None) == (not headers)


def test_superscript_digits_are_not_digits() -> None:
    assert [ascii_int(v) for v in ("²", "1²", "¹", "٣", " 42 ", "")] == [None] * 4 + [42, None]


@given(st.binary(max_size=200))
def test_any_decompressed_bytes_decode_or_raise_the_contract_error(raw: bytes) -> None:
    body = bytes(snappy.compress(raw))
    with contextlib.suppress(ContractError):  # anything else fails the test
        decode_write_request(body, limits=DecodeLimits(1 << 20, max_series=5, max_samples=5))


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        (DecodeLimits(1 << 20, max_series=1), r"more than 1 series \(server.remote_write_max_series"),
        (DecodeLimits(1 << 20, max_samples=2), r"more than 2 samples \(server.remote_write_max_samples\)"),
        (DecodeLimits(1 << 20, max_samples_per_series=1), r"has 2 samples, over 1"),
        (DecodeLimits(1 << 20, max_labels=1), r"has 2 labels, over 1"),
        (DecodeLimits(1 << 20, max_label_bytes=10), r"more than 10 bytes of label"),
        (DecodeLimits(1 << 20, max_timestamp_ms=1), r"at 2 ms, outside the storable range"),
    ],
)  # fmt: skip
def test_each_limit_is_named(limits: DecodeLimits, message: str) -> None:
    series = [Series({"__name__": "m", "gpu": "0"}, [(1, 1.0), (2, 2.0)])] * 2
    with pytest.raises(ContractError, match=message):
        decode_write_request(encode_write_request(series), limits=limits)
