"""Validation of ingest requests: the envelope (headers), the Arrow body and job records.

Every check raises IngestError with the HTTP status the contract prescribes and a message that
names what is wrong (the header, the column, the record and field), so the handler only turns it
into JSON. The envelope is checked before the body is read: an oversized or mislabelled request
costs the server nothing. This module must never touch the writer, the database or the network.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any, Protocol

import pyarrow as pa

from fleetscope.contract import (
    ARROW_STREAM_MEDIA_TYPE,
    HEADER_AGENT,
    HEADER_BATCH_ID,
    HEADER_SCHEMA_VERSION,
    MAX_BATCH_ROWS,
    MAX_DECODED_BYTES,
    READABLE_SCHEMA_VERSIONS,
    TABLES,
    conform,
    from_ipc,
)
from fleetscope.errors import ContractError, DecodeBudgetError, IngestError, PayloadTooLargeError
from warehouse.catalog.fleet import Job
from warehouse.ingest.framing import ascii_int

_BATCH_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_AGENT_PRODUCT = "fleetscope-agent/"


class Headers(Protocol):
    """Case-insensitive header lookup (http.server's message, or a dict in tests)."""

    def get(self, name: str, /) -> str | None: ...


@dataclass(frozen=True)
class Envelope:
    """What the headers of a batch request say, checked."""

    table: str
    batch_id: str
    agent: str
    agent_version: str
    content_length: int


def check_envelope(table: str, headers: Headers, max_body_bytes: int) -> Envelope:
    """Check everything but the body, in the order a client most needs to hear about it."""
    if table not in TABLES:
        raise IngestError(f"unknown table {table!r}; expected one of {sorted(TABLES)}", status=404)
    media_type = (headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
    if media_type != ARROW_STREAM_MEDIA_TYPE:
        raise IngestError(
            f"Content-Type must be {ARROW_STREAM_MEDIA_TYPE}, got {media_type or 'none'!r}",
            status=415,
        )
    raw_version = headers.get(HEADER_SCHEMA_VERSION)
    version_number = ascii_int(raw_version)
    if version_number is None:
        raise IngestError(
            f"{HEADER_SCHEMA_VERSION} must be an integer, got {raw_version!r} (ASCII digits)"
        )
    if version_number not in READABLE_SCHEMA_VERSIONS:
        raise IngestError(
            f"schema version {version_number} is not one this server reads "
            f"({sorted(READABLE_SCHEMA_VERSIONS)}); upgrade the server or the agent",
            status=422,
        )
    batch_id = headers.get(HEADER_BATCH_ID) or ""
    if not _BATCH_ID.match(batch_id):
        raise IngestError(
            f"{HEADER_BATCH_ID} must be 1-64 characters of letters, digits, '_', '-', '.'; "
            f"got {batch_id[:80]!r}"
        )
    length = ascii_int(headers.get("Content-Length"))
    if length is None:
        raise IngestError("Content-Length is required, in ASCII digits", status=411)
    if length > max_body_bytes:
        raise PayloadTooLargeError(
            f"body of {length} bytes is over the limit of {max_body_bytes} bytes "
            "(server.max_body_bytes); send smaller batches"
        )
    user_agent = headers.get("User-Agent") or ""
    version = (
        user_agent.split()[0].removeprefix(_AGENT_PRODUCT)
        if user_agent.startswith(_AGENT_PRODUCT)
        else ""
    )
    return Envelope(table, batch_id, headers.get(HEADER_AGENT) or "", version, length)


def decode_batch(
    table: str,
    body: bytes,
    *,
    max_decoded_bytes: int = MAX_DECODED_BYTES,
    max_rows: int = MAX_BATCH_ROWS,
) -> pa.Table:
    """The body as a table fully validated and conformed to the contract, or a 4xx naming why:
    413 when it would decode past the budget (checked before decoding), 400 otherwise."""
    try:
        return conform(
            table, from_ipc(body, max_decoded_bytes=max_decoded_bytes, max_rows=max_rows)
        )
    except DecodeBudgetError as exc:
        raise PayloadTooLargeError(str(exc)) from exc
    except ContractError as exc:
        raise IngestError(str(exc)) from exc


_JOB_FIELDS = {f.name: f for f in fields(Job)}
_TEXT_FIELDS = {"cluster", "user", "team", "name", "model", "scheduler"}


MAX_JOBS_JSON_BYTES = 16 * 1024 * 1024  # about 50,000 job records in one POST /v1/jobs
MAX_JSON_DEPTH = 32  # a job record is 3 deep (list, record, placement); a poll about the same


def load_json(body: bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Any JSON request body, or a 400: not JSON, or nested deeper than `max_depth`.

    Why: the C decoder recurses, so a body of 100,000 '[' raised RecursionError, answered 500
    (issue 12). Bodies are size-capped by the handler's read_body before they get here.
    """
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IngestError(f"body is not JSON: {exc}") from exc
    except RecursionError:
        raise IngestError(f"body is JSON nested deeper than {max_depth} levels") from None
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list) and depth > max_depth:
            raise IngestError(f"body is JSON nested deeper than {max_depth} levels")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
    return data


def parse_jobs(body: bytes) -> list[Job]:
    """A JSON list of job records; 400 naming the record index and field on any mistake."""
    records = load_json(body)
    if not isinstance(records, list):
        raise IngestError("body must be a JSON list of job records")
    return [_job(i, record) for i, record in enumerate(records)]


def _job(index: int, record: Any) -> Job:
    where = f"jobs[{index}]"
    if not isinstance(record, dict):
        raise IngestError(f"{where}: expected an object, got {type(record).__name__}")
    unknown = sorted(set(record) - set(_JOB_FIELDS))
    if unknown:
        raise IngestError(f"{where}: unknown fields {unknown}; known: {sorted(_JOB_FIELDS)}")
    job_id = record.get("job_id")
    if not isinstance(job_id, str) or not job_id:
        raise IngestError(f"{where}.job_id: required, a non-empty string")
    values: dict[str, Any] = {"job_id": job_id}
    for name in _TEXT_FIELDS & set(record):
        value = record[name]
        if value is not None and not isinstance(value, str):
            raise IngestError(f"{where}.{name}: expected a string, got {value!r}")
        values[name] = value
    for name in ("start_ts", "end_ts"):
        if record.get(name) is not None:
            values[name] = _timestamp(f"{where}.{name}", record[name])
    gpus = record.get("gpus")
    if isinstance(gpus, list):
        # A scheduler hook that knows the placements (host, gpu_index, MIG instance: what the
        # simulator's prolog sends) gives the list; the catalog keeps how many distinct GPUs.
        gpus = len({_placement(f"{where}.gpus[{i}]", p) for i, p in enumerate(gpus)})
    if gpus is not None:
        if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 0:
            raise IngestError(
                f"{where}.gpus: expected a non-negative integer or a list of placements, got {gpus!r}"
            )
        values["gpus"] = gpus
    return Job(**values)


def _placement(where: str, placement: Any) -> tuple[str, int, int | None]:
    if (
        not isinstance(placement, dict)
        or not isinstance(placement.get("host"), str)
        or not isinstance(placement.get("gpu_index"), int)
    ):
        raise IngestError(f"{where}: expected an object with host and gpu_index, got {placement!r}")
    mig = placement.get("mig_instance_id")
    return placement["host"], placement["gpu_index"], mig if isinstance(mig, int) else None


def _timestamp(where: str, value: Any) -> datetime:
    """ISO 8601 with an offset, or epoch seconds; a naive time is ambiguous and refused."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(float(value), UTC)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is not None:
            return parsed.astimezone(UTC)
    raise IngestError(
        f"{where}: expected ISO 8601 with a UTC offset or epoch seconds, got {value!r}"
    )
