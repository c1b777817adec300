"""The few protobuf messages of Prometheus remote_write 1.0, and the snappy framing around them.

What it is for: turning a `POST /api/v1/write` body into (labels, samples) per series, and (for
tests and tools) building one. The messages are the subset of prometheus/prompb types.proto and
remote.proto that remote_write 1.0 needs, declared here as a descriptor instead of generated code
(no protoc step, and the C `upb` decoder still does the parsing):

    message WriteRequest { repeated TimeSeries timeseries = 1; }   // 3: metadata, ignored
    message TimeSeries   { repeated Label labels = 1; repeated Sample samples = 2; }
                                                                   // 3: exemplars, 4: histograms
    message Label        { string name = 1; string value = 2; }
    message Sample       { double value = 1; int64 timestamp = 2; }   // timestamp in ms

Fields this subset does not declare (metadata-only requests Prometheus sends every
`metadata_config.send_interval`, exemplars, native histograms) are skipped by protobuf as unknown
fields, so such requests decode to no samples instead of failing. The body is snappy's *block*
format (not the framed/stream format), per the remote_write 1.0 specification.

Must never: know about DCGM, rows or the warehouse; it only speaks the wire format.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

import snappy
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from fleetscope.errors import ContractError, DecodeBudgetError

__all__ = [
    "STALE_NAN_BITS",
    "DecodeLimits",
    "Series",
    "decode_write_request",
    "encode_write_request",
    "is_stale_marker",
]

# Prometheus's staleness marker: a NaN with this exact bit pattern (model/value.StaleNaN), written
# when a series disappears from its target or the target's scrape fails.
STALE_NAN_BITS: Final = 0x7FF0000000000002

_F = descriptor_pb2.FieldDescriptorProto


def _build_pool() -> descriptor_pool.DescriptorPool:
    proto = descriptor_pb2.FileDescriptorProto(
        name="fleetscope/prompb_subset.proto", package="fleetscope.prompb", syntax="proto3"
    )

    def message(name: str, *fields: tuple[str, int, int, int, str]) -> None:
        msg = proto.message_type.add(name=name)
        for field_name, number, field_type, label, type_name in fields:
            added = msg.field.add(name=field_name, number=number, type=field_type, label=label)
            if type_name:
                added.type_name = type_name

    one, many = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
    message("Label", ("name", 1, _F.TYPE_STRING, one, ""), ("value", 2, _F.TYPE_STRING, one, ""))
    message(
        "Sample", ("value", 1, _F.TYPE_DOUBLE, one, ""), ("timestamp", 2, _F.TYPE_INT64, one, "")
    )
    message(
        "TimeSeries",
        ("labels", 1, _F.TYPE_MESSAGE, many, ".fleetscope.prompb.Label"),
        ("samples", 2, _F.TYPE_MESSAGE, many, ".fleetscope.prompb.Sample"),
    )
    message(
        "WriteRequest",
        ("timeseries", 1, _F.TYPE_MESSAGE, many, ".fleetscope.prompb.TimeSeries"),
    )
    pool = descriptor_pool.DescriptorPool()  # private: never clashes with other .proto files
    pool.Add(proto)
    return pool


_POOL = _build_pool()
WriteRequest: Any = message_factory.GetMessageClass(
    _POOL.FindMessageTypeByName("fleetscope.prompb.WriteRequest")
)
TimeSeries: Any = message_factory.GetMessageClass(
    _POOL.FindMessageTypeByName("fleetscope.prompb.TimeSeries")
)


class Series(NamedTuple):
    """One series of a request: its labels (with `__name__`) and its (timestamp_ms, value)s."""

    labels: dict[str, str]
    samples: list[tuple[int, float]]


def is_stale_marker(value: float) -> bool:
    """True for Prometheus's StaleNaN (not for any other NaN an exporter may report)."""
    return value != value and struct.unpack("<Q", struct.pack("<d", value))[0] == STALE_NAN_BITS


def _uncompressed_length(body: bytes) -> int:
    """The varint that opens every snappy block: the length of the data it decompresses to."""
    result = shift = 0
    for i, byte in enumerate(body[:10]):
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result
        shift += 7
        if i == 4:  # snappy lengths are uint32: at most 5 varint bytes
            break
    raise ContractError("body is not snappy-compressed (block format): bad length header")


@dataclass(frozen=True)
class DecodeLimits:
    """What one request may hold; every limit breached is DecodeBudgetError naming its setting.

    Why each exists (issue 28): the C parser turns a few bytes into a Python object each, so the
    decompressed-size cap alone let 1.1 M empty series in a 1.2 MB body build 632 MB of objects,
    and one series of 500,000 samples ran for minutes. Defaults are far above what Prometheus
    sends (`queue_config.max_samples_per_send` defaults to 2000 samples per request).
    """

    max_uncompressed_bytes: int
    max_series: int = 50_000
    max_samples: int = 200_000
    max_samples_per_series: int = 10_000
    max_labels: int = 128
    max_label_bytes: int = 16 * 1024 * 1024
    min_timestamp_ms: int = -(2**62)
    max_timestamp_ms: int = 2**62


_FIXED_SIZES: Final = {1: 8, 5: 4}  # wire types 1 (fixed64) and 5 (fixed32)


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """The varint at `pos` and the position after it; ContractError when it is cut or too long."""
    result = shift = 0
    while shift < 64:
        if pos >= len(buf):
            raise ContractError("body is not a remote_write WriteRequest protobuf: truncated")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
    raise ContractError("body is not a remote_write WriteRequest protobuf: varint too long")


def _series_messages(raw: bytes, max_series: int) -> Iterator[bytes]:
    """The encoded TimeSeries of a WriteRequest, one at a time (fields other than 1 skipped).

    Walking the outer message by hand is what bounds memory: the count is refused at
    `max_series + 1` without reading further, and each series is parsed (and checked) alone.
    """
    pos, count, end = 0, 0, len(raw)
    while pos < end:
        tag, pos = _varint(raw, pos)
        field, wire_type = tag >> 3, tag & 7
        if wire_type == 2:
            length, pos = _varint(raw, pos)
            if pos + length > end:
                raise ContractError("body is not a remote_write WriteRequest protobuf: truncated")
            if field == 1:
                count += 1
                if count > max_series:
                    raise DecodeBudgetError(
                        f"request holds more than {max_series} series "
                        "(server.remote_write_max_series); lower max_samples_per_send"
                    )
                yield raw[pos : pos + length]
            pos += length
        elif wire_type == 0:
            _, pos = _varint(raw, pos)
        elif wire_type in _FIXED_SIZES:
            pos += _FIXED_SIZES[wire_type]
        else:
            raise ContractError(
                f"body is not a remote_write WriteRequest protobuf: wire type {wire_type}"
            )
    if pos != end:
        raise ContractError("body is not a remote_write WriteRequest protobuf: truncated")


def _series(encoded: bytes, limits: DecodeLimits, budget: list[int]) -> Series:
    """One TimeSeries checked against the limits; `budget` is [samples, label bytes] left."""
    try:
        ts = TimeSeries.FromString(encoded)
    except DecodeError as exc:
        raise ContractError(f"body is not a remote_write WriteRequest protobuf: {exc}") from exc
    if len(ts.labels) > limits.max_labels:
        raise DecodeBudgetError(
            f"a series has {len(ts.labels)} labels, over {limits.max_labels} "
            "(server.remote_write_max_labels)"
        )
    labels = {label.name: label.value for label in ts.labels}
    budget[1] -= sum(len(k) + len(v) for k, v in labels.items())
    if budget[1] < 0:
        raise DecodeBudgetError(
            f"request holds more than {limits.max_label_bytes} bytes of label names and values "
            "(server.remote_write_max_label_bytes)"
        )
    n = len(ts.samples)
    if n > limits.max_samples_per_series:
        raise DecodeBudgetError(
            f"series {labels.get('__name__', '')!r} has {n} samples, over "
            f"{limits.max_samples_per_series} (server.remote_write_max_samples_per_series)"
        )
    budget[0] -= n
    if budget[0] < 0:
        raise DecodeBudgetError(
            f"request holds more than {limits.max_samples} samples "
            "(server.remote_write_max_samples); lower max_samples_per_send"
        )
    samples = [(sample.timestamp, sample.value) for sample in ts.samples]
    if samples:
        low = min(samples)[0]
        high = max(samples)[0]
        if low < limits.min_timestamp_ms or high > limits.max_timestamp_ms:
            bad = low if low < limits.min_timestamp_ms else high
            raise ContractError(
                f"series {labels.get('__name__', '')!r} has a sample at {bad} ms, outside the "
                f"storable range {limits.min_timestamp_ms}..{limits.max_timestamp_ms} ms"
            )
    return Series(labels, samples)


def decode_write_request(body: bytes, *, limits: DecodeLimits) -> list[Series]:
    """A snappy-compressed WriteRequest -> its series; ContractError saying what is wrong,
    DecodeBudgetError (a ContractError) naming the limit a request breaks.

    The declared uncompressed length is checked against `max_uncompressed_bytes` before any
    memory is spent on it, so a small body cannot expand into gigabytes; the series are then
    parsed one at a time (see `_series_messages`) and counted as they come.
    """
    if not body:
        raise ContractError("empty body: expected a snappy-compressed WriteRequest")
    length = _uncompressed_length(body)
    if length > limits.max_uncompressed_bytes:
        raise DecodeBudgetError(
            f"body decompresses to {length} bytes, over the limit of "
            f"{limits.max_uncompressed_bytes} (server.max_body_bytes); "
            "lower queue_config.max_samples_per_send"
        )
    try:
        raw = bytes(snappy.uncompress(body))
    except snappy.UncompressError as exc:
        raise ContractError(
            f"body is not snappy-compressed (block format): {exc or 'corrupt data'}"
        ) from exc
    # Counted before any is parsed: a request over max_series is refused at the cost of a walk.
    encoded = list(_series_messages(raw, limits.max_series))
    budget = [limits.max_samples, limits.max_label_bytes]
    return [_series(one, limits, budget) for one in encoded]


def encode_write_request(series: list[Series]) -> bytes:
    """The snappy-compressed body Prometheus would send for `series` (tests and tools)."""
    request = WriteRequest()
    for one in series:
        ts = request.timeseries.add()
        for name in sorted(one.labels):  # Prometheus sends labels sorted by name
            ts.labels.add(name=name, value=one.labels[name])
        for timestamp_ms, value in one.samples:
            ts.samples.add(timestamp=timestamp_ms, value=value)
    return bytes(snappy.compress(request.SerializeToString()))
