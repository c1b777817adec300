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
from typing import Any, Final, NamedTuple

import snappy
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from fleetscope.errors import ContractError

__all__ = [
    "STALE_NAN_BITS",
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


def decode_write_request(body: bytes, *, max_uncompressed_bytes: int) -> list[Series]:
    """A snappy-compressed WriteRequest -> its series; ContractError saying what is wrong.

    The declared uncompressed length is checked against `max_uncompressed_bytes` before any
    memory is spent on it, so a small body cannot expand into gigabytes.
    """
    if not body:
        raise ContractError("empty body: expected a snappy-compressed WriteRequest")
    length = _uncompressed_length(body)
    if length > max_uncompressed_bytes:
        raise ContractError(
            f"body decompresses to {length} bytes, over the limit of {max_uncompressed_bytes}; "
            "lower queue_config.max_samples_per_send"
        )
    try:
        raw = snappy.uncompress(body)
    except snappy.UncompressError as exc:
        raise ContractError(
            f"body is not snappy-compressed (block format): {exc or 'corrupt data'}"
        ) from exc
    request = WriteRequest()
    try:
        request.ParseFromString(bytes(raw))
    except DecodeError as exc:
        raise ContractError(f"body is not a remote_write WriteRequest protobuf: {exc}") from exc
    return [
        Series(
            {label.name: label.value for label in ts.labels},
            [(sample.timestamp, sample.value) for sample in ts.samples],
        )
        for ts in request.timeseries
    ]


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
