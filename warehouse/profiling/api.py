"""HTTP routes of on-demand profiling: parse and check requests, hand them to the ProfilingService.

    POST /v1/profile-requests        {job_id, rank?, steps? | duration_s?} -> 201 {id}
    GET  /v1/profile-requests/<id>   -> {state, matched, error, trace_id, traces, summary, ...}
    POST /v1/agent/poll              {host, processes: [{pid, job_id, rank}], results?} ->
                                     200 {requests: [{request_id, job_id, rank, steps,
                                     duration_s, pids}], max_trace_bytes}
    POST /v1/traces?request_id=&host=&rank=&pid=   gzip Kineto trace -> 201 {trace_id}

Every route needs the bearer token. Bad arguments are 400 naming the argument, an unknown job or
request 404, a trace no request expects 409, a trace over server.max_body_bytes 413 (and the
request fails with that reason). Must never do more than parsing and answering: the state machine
lives in warehouse.profiling.service.
"""

from __future__ import annotations

import math
import urllib.parse
from typing import Any, Protocol

from fleetscope.errors import IngestError, NotFoundError, PayloadTooLargeError
from warehouse.ingest.envelope import load_json
from warehouse.ingest.framing import ascii_int
from warehouse.ingest.response import Response
from warehouse.profiling.agent_registry import ReportedProcess
from warehouse.profiling.service import AgentResult, ProfilingService


class Handler(Protocol):
    """The one request these routes answer, as the ingest server's transport hands it over.

    A protocol, not warehouse.ingest.server's class: the server imports these routes, so naming its
    types here would make the two modules import each other.
    """

    @property
    def path(self) -> str: ...

    @property
    def headers(self) -> Any: ...  # http.client.HTTPMessage: .get(name) -> str | None

    def read_body(self, limit: int) -> bytes: ...


class _Auth(Protocol):
    def check(self, authorization: str | None) -> Any: ...


class _Config(Protocol):
    @property
    def max_body_bytes(self) -> int: ...

    @property
    def read_auth(self) -> bool: ...


class Ingest(Protocol):
    """What the routes need from the server: its profiling service, its tokens and two limits."""

    @property
    def profiling(self) -> ProfilingService | None: ...

    @property
    def auth(self) -> _Auth: ...

    @property
    def config(self) -> _Config: ...


MAX_JSON_BYTES = 1024 * 1024  # a poll lists a host's processes: kilobytes, never megabytes
# Upper bounds on one request; a profile of more steps than this yields a trace no server accepts.
MAX_STEPS = 1000
MAX_DURATION_S = 3600.0


def _json(status: int, payload: object) -> Response:
    return Response.json(status, payload)


def _service(ingest: Ingest) -> ProfilingService:
    if ingest.profiling is None:
        raise IngestError("on-demand profiling is not enabled on this server", status=404)
    service: ProfilingService = ingest.profiling
    return service


def _read_json(handler: Handler, ingest: Ingest) -> dict[str, Any]:
    data = load_json(handler.read_body(min(MAX_JSON_BYTES, ingest.config.max_body_bytes)))
    if not isinstance(data, dict):
        raise IngestError("body must be a JSON object")
    return data


def _optional_int(data: dict[str, Any], key: str, *, low: int, high: int) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise IngestError(f"{key} must be an integer from {low} to {high}, got {value!r}")
    return value


def _text(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip() or len(value) > 255:
        raise IngestError(f"{key} must be a non-empty string of at most 255 characters")
    return value


def parse_profile_request(data: dict[str, Any]) -> tuple[str, int | None, int | None, float | None]:
    """(job_id, rank, steps, duration_s) from a request body; IngestError(400) names the problem."""
    unknown = sorted(set(data) - {"job_id", "rank", "steps", "duration_s"})
    if unknown:
        raise IngestError(f"unknown fields {unknown}; expected job_id, rank, steps, duration_s")
    job_id = _text(data, "job_id")
    rank = _optional_int(data, "rank", low=0, high=2**31 - 1)
    steps = _optional_int(data, "steps", low=1, high=MAX_STEPS)
    duration = data.get("duration_s")
    if duration is not None:
        if (
            isinstance(duration, bool)
            or not isinstance(duration, int | float)
            or not math.isfinite(duration)
            or not 0 < duration <= MAX_DURATION_S
        ):
            raise IngestError(
                f"duration_s must be a number of seconds in (0, {MAX_DURATION_S:g}], "
                f"got {duration!r}"
            )
        duration = float(duration)
    if steps is not None and duration is not None:
        raise IngestError("give steps or duration_s, not both")
    return job_id, rank, steps, duration


def post_profile_request(handler: Handler, ingest: Ingest) -> Response:
    ingest.auth.check(handler.headers.get("Authorization"))
    service = _service(ingest)
    job_id, rank, steps, duration_s = parse_profile_request(_read_json(handler, ingest))
    try:
        request_id = service.create(job_id, rank=rank, steps=steps, duration_s=duration_s)
    except NotFoundError as exc:
        raise IngestError(str(exc), status=404) from exc
    return _json(201, {"id": request_id})


def get_profile_request(handler: Handler, ingest: Ingest, request_id: str) -> Response:
    if ingest.config.read_auth:  # a request names a job: job data (server.read_auth)
        ingest.auth.check(handler.headers.get("Authorization"))
    try:
        return _json(200, _service(ingest).describe(int(request_id)))
    except NotFoundError as exc:
        raise IngestError(str(exc), status=404) from exc


def _processes(data: dict[str, Any]) -> list[ReportedProcess]:
    raw = data.get("processes", [])
    if not isinstance(raw, list):
        raise IngestError("processes must be a list of {pid, job_id, rank}")
    out = []
    for item in raw:
        if not isinstance(item, dict):
            raise IngestError("processes must be a list of {pid, job_id, rank}")
        pid = _optional_int(item, "pid", low=1, high=2**31 - 1)
        if pid is None:
            raise IngestError("every process needs a pid")
        job_id = item.get("job_id")
        if job_id is not None and not isinstance(job_id, str):
            raise IngestError(f"process {pid}: job_id must be a string or null")
        out.append(ReportedProcess(pid, job_id, _optional_int(item, "rank", low=0, high=2**31 - 1)))
    return out


def _results(data: dict[str, Any]) -> list[AgentResult]:
    raw = data.get("results", [])
    if not isinstance(raw, list) or not all(isinstance(r, dict) for r in raw):
        raise IngestError("results must be a list of {request_id, pid, error}")
    out = []
    for item in raw:
        request_id = _optional_int(item, "request_id", low=1, high=2**63 - 1)
        pid = _optional_int(item, "pid", low=1, high=2**31 - 1)
        if request_id is None or pid is None:
            raise IngestError("every result needs request_id and pid")
        out.append(AgentResult(request_id, pid, str(item.get("error") or "unknown agent error")))
    return out


def post_agent_poll(handler: Handler, ingest: Ingest) -> Response:
    ingest.auth.check(handler.headers.get("Authorization"))
    service = _service(ingest)
    data = _read_json(handler, ingest)
    host = _text(data, "host")
    assignments = service.poll(host, _processes(data), _results(data))
    return _json(
        200,
        {
            "requests": [a.to_json() for a in assignments],
            "max_trace_bytes": service.config.max_trace_bytes,
        },
    )


def _query_int(query: dict[str, list[str]], key: str, *, required: bool) -> int | None:
    values = query.get(key)
    if not values or not values[0]:
        if required:
            raise IngestError(f"query parameter {key} is required")
        return None
    try:
        return int(values[0])
    except ValueError as exc:
        raise IngestError(f"query parameter {key} must be an integer, got {values[0]!r}") from exc


def post_trace(handler: Handler, ingest: Ingest) -> Response:
    ingest.auth.check(handler.headers.get("Authorization"))
    service = _service(ingest)
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(handler.path).query)
    request_id = _query_int(query, "request_id", required=True)
    pid = _query_int(query, "pid", required=True)
    rank = _query_int(query, "rank", required=False)
    host = (query.get("host") or [""])[0]
    if not host:
        raise IngestError("query parameter host is required")
    assert request_id is not None and pid is not None
    length = ascii_int(handler.headers.get("Content-Length"))
    limit = service.config.max_trace_bytes
    try:
        if length is not None and length > limit:
            service.reject_oversized(request_id, host, pid, length)
            raise PayloadTooLargeError(
                f"trace of {length} bytes is over the limit of {limit} bytes"
            )
        upload = service.receive_trace(request_id, host, pid, rank, handler.read_body(limit))
    except NotFoundError as exc:
        raise IngestError(str(exc), status=404) from exc
    return _json(201, {"trace_id": upload.trace_id, "path": upload.location})
