"""What a remote_write request must be before its body is decoded: its headers, and the limits
of one request taken from the settings.

Its own module so warehouse.prometheus.remote_write (the assembly of scrapes) stays about assembly; the
server calls `check_headers` before reading the body, and the receiver decodes with
`decode_limits(settings)`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from fleetscope.contract import MAX_TS_MS, MIN_TS_MS
from fleetscope.errors import IngestError
from warehouse.ingest.envelope import Headers
from warehouse.prometheus.prompb import DecodeLimits

if TYPE_CHECKING:
    from fleetscope.settings import Settings

__all__ = ["PROTOBUF_MEDIA_TYPE", "check_headers", "decode_limits"]

PROTOBUF_MEDIA_TYPE: Final = "application/x-protobuf"


def check_headers(headers: Headers) -> None:
    """The remote_write 1.0 envelope; 415 for what a 1.0 receiver cannot read.

    remote_write 2.0 senders announce `proto=io.prometheus.write.v2.Request` in Content-Type and
    version 2.x; the 2.0 specification asks a receiver that cannot read it to answer 415 so the
    sender can fall back to 1.0.
    """
    content_type = headers.get("Content-Type") or ""
    media_type, _, params = content_type.partition(";")
    if media_type.strip().lower() != PROTOBUF_MEDIA_TYPE:
        raise IngestError(
            f"Content-Type must be {PROTOBUF_MEDIA_TYPE}, got {content_type or 'none'!r}",
            status=415,
        )
    proto = params.replace(" ", "").lower()
    if "proto=" in proto and "proto=prometheus.writerequest" not in proto:
        raise IngestError(
            f"only remote_write 1.0 (prometheus.WriteRequest) is read: {content_type!r}", status=415
        )
    encoding = (headers.get("Content-Encoding") or "").strip().lower()
    if encoding != "snappy":
        raise IngestError(
            f"Content-Encoding must be snappy, got {encoding or 'none'!r}", status=415
        )
    version = (headers.get("X-Prometheus-Remote-Write-Version") or "0.1.0").strip()
    if not version.startswith(("0.", "1.")):
        raise IngestError(f"remote_write version {version!r} is not read; send 0.1.0", status=415)


def decode_limits(settings: Settings) -> DecodeLimits:
    """The per-request limits of the settings, and the storable timestamp range of the contract."""
    server = settings.server
    return DecodeLimits(
        max_uncompressed_bytes=server.max_body_bytes,
        max_series=server.remote_write_max_series,
        max_samples=server.remote_write_max_samples,
        max_samples_per_series=server.remote_write_max_samples_per_series,
        max_labels=server.remote_write_max_labels,
        max_label_bytes=server.remote_write_max_label_bytes,
        min_timestamp_ms=MIN_TS_MS,
        max_timestamp_ms=MAX_TS_MS,
    )
