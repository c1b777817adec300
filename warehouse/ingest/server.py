"""The ingest HTTP server: routes, status codes and JSON answers; nothing else.

    POST /v1/batches/<table>   Arrow IPC batch (wire format: fleetscope.contract) -> 202 once committed
    POST /v1/jobs              JSON list of job records -> upserted into the catalog
    POST /api/v1/write         Prometheus remote_write 1.0 (warehouse.prometheus.remote_write) -> 204
    POST /v1/profile-requests, GET /v1/profile-requests/<id>, POST /v1/agent/poll,
    POST /v1/traces            on-demand profiling (warehouse.profiling.api)
    GET  /healthz              liveness and the writer's queue depth
    GET  /v1/server            where the server keeps its data (folders), for a CLI on its machine
    GET  /metrics              the server's own Prometheus metrics (bearer token if read_auth)
    ...                        then the routes server plug-ins add (Ingest.routes): the read API,
                               GET /v1/findings, /v1/opportunities, /v1/jobs/<id> (analyzers.read_api)

Every refusal is an IngestError turned into `{"error": ...}` with its status; a batch request is
answered 202 only after the writer committed it (Ticket.wait), so 202 means durable and an agent
that got no answer retries with the same batch id. When the body was not read (401, 408, 411,
413, 415, 422), the connection is closed after the answer so unread bytes never reach the next
request. Framing is checked first, for every route (warehouse.ingest.framing: RFC 9112, 400 and close
on conflicting or non-ASCII lengths), and a body's declared length is reserved against
server.max_inflight_bytes before it is read (warehouse.ingest.inflight: 503 with Retry-After beyond).

The HTTP layer is uvicorn with httptools (llhttp), through its public Config/Server, on one event
loop thread; issue 28 asked to keep the standard library's ThreadingHTTPServer only if a
well-kept server cost more per batch, and on a quiet machine it cost less (bench/http_servers.py,
bench/RESULTS.md "The ingest server on uvicorn"). What uvicorn has no setting for lives in
`warehouse.ingest.protocol.IngestProtocol`, a small subclass of its httptools protocol: at most
server.max_connections connections, then a canned 503 with Retry-After (warehouse.ingest.
connections); a request line and headers within server.header_timeout_s; framing errors llhttp
catches answered with framing's message; the head capped (431); reading paused at the end of a
head so a body stays in the socket until its route reserves it. Handlers are small blocking
functions in a route table; they run on a thread pool sized from server.max_connections (they
block on Ticket.wait, and 256 agents waiting must not queue behind a few threads), and read the
body through `warehouse.ingest.handler.Handler` (within server.body_timeout_s, else 408). With
server.tls_cert_file/tls_key_file it serves HTTPS; asyncio runs the TLS handshake on the loop,
never blocking another connection (bounded by asyncio's 60 s handshake timeout: uvicorn does not
pass server.header_timeout_s to it, and a connection counts against the cap once its handshake
is done). `IngestHTTPServer.stop` answers 503 to what arrives meanwhile, lets requests in flight
finish (up to 5 s) and closes every connection, idle kept-alive ones included.
This module must never talk to DuckDB: only the writer does.
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import Engine

from fleetscope.contract import MAX_BATCH_ROWS, MAX_DECODED_BYTES
from fleetscope.errors import ConfigError, FleetscopeError, IngestError
from fleetscope.settings import Settings
from warehouse.catalog.fleet import upsert_jobs
from warehouse.ingest.auth import TokenChecker
from warehouse.ingest.connections import ConnectionGuard
from warehouse.ingest.envelope import MAX_JOBS_JSON_BYTES, check_envelope, decode_batch, parse_jobs
from warehouse.ingest.framing import body_length, has_body_framing
from warehouse.ingest.handler import Handler, Receive, RequestHeaders
from warehouse.ingest.inflight import InFlightBytes
from warehouse.ingest.metrics import ServerMetrics
from warehouse.ingest.protocol import BODY_ARRIVED, IngestProtocol
from warehouse.ingest.response import Response
from warehouse.ingest.sink import BatchSink
from warehouse.profiling.api import (
    get_profile_request,
    post_agent_poll,
    post_profile_request,
    post_trace,
)
from warehouse.profiling.service import ProfilingService
from warehouse.prometheus.remote_write import RemoteWrite
from warehouse.prometheus.remote_write_request import check_headers

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IngestConfig:
    max_body_bytes: int
    commit_timeout_s: float
    max_decoded_bytes: int = MAX_DECODED_BYTES
    max_batch_rows: int = MAX_BATCH_ROWS
    read_auth: bool = True
    max_connections: int = 256
    max_inflight_bytes: int = 256 * 1024 * 1024
    header_timeout_s: float = 30.0
    body_timeout_s: float = 60.0
    # Where this server keeps what readers read (GET /v1/server): setting key -> value, the
    # folders absolute. The CLI asks for it when its own core.data_dir is not there (issue 31).
    read_location: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_settings(cls, settings: Settings) -> IngestConfig:
        """The limits from the settings: one place for the embedded server and fleet gateways."""
        if settings.server.max_inflight_bytes < settings.server.max_body_bytes:
            raise ConfigError(
                f"server.max_inflight_bytes ({settings.server.max_inflight_bytes}) must be at "
                f"least server.max_body_bytes ({settings.server.max_body_bytes})"
            )
        return cls(
            max_body_bytes=settings.server.max_body_bytes,
            commit_timeout_s=settings.warehouse.commit_timeout_s,
            max_decoded_bytes=settings.server.max_decoded_bytes,
            max_batch_rows=settings.server.max_batch_rows,
            read_auth=settings.server.read_auth,
            max_connections=settings.server.max_connections,
            max_inflight_bytes=settings.server.max_inflight_bytes,
            header_timeout_s=settings.server.header_timeout_s,
            body_timeout_s=settings.server.body_timeout_s,
            read_location=read_location(settings),
        )


# The settings a reader on this machine needs to read what the server writes (server.mode's
# embedded warehouse and catalog); never a URL with a password in it.
READ_LOCATION_KEYS = ("core.data_dir", "warehouse.segments_dir", "analyzers.sketches_dir")


def read_location(settings: Settings) -> tuple[tuple[str, str], ...]:
    """`READ_LOCATION_KEYS` as this server resolved them (absolute; empty where unset), with
    server.mode."""
    found = [("server.mode", settings.server.mode)]
    for key in READ_LOCATION_KEYS:
        value = str(settings.raw(key) or "")
        found.append((key, str(settings.path(value).resolve()) if value else ""))
    return tuple(found)


@dataclass
class Ingest:
    """What the handlers need: the writer, the catalog, token checks, metrics and limits."""

    writer: BatchSink
    catalog: Engine
    auth: TokenChecker
    metrics: ServerMetrics
    config: IngestConfig
    remote_write: RemoteWrite | None = None
    profiling: ProfilingService | None = None
    # Routes server plug-ins add (warehouse.ingest.plugin_host PluginHost.routes), after ROUTES.
    routes: list[tuple[str, re.Pattern[str], str, Route]] = field(default_factory=list)


class IngestHTTPServer:
    """The listener: uvicorn with httptools on its own event loop thread, routes on a pool.

    Bound at construction (an address in use fails here, before anything starts); `start` serves
    on a thread, `stop` refuses new requests, lets those in flight finish (up to
    `GRACEFUL_STOP_S`) and closes every connection, so a client's retry reaches the next server.
    """

    GRACEFUL_STOP_S = 5.0

    def __init__(
        self, address: tuple[str, int], ingest: Ingest, tls: ssl.SSLContext | None = None
    ) -> None:
        self.ingest = ingest
        self.tls = tls
        self.stopping = False
        config = ingest.config
        self.inflight = InFlightBytes(config.max_inflight_bytes, registry=ingest.metrics.registry)
        self.guard = ConnectionGuard(
            max_connections=config.max_connections,
            header_timeout_s=config.header_timeout_s,
            registry=ingest.metrics.registry,
        )
        self._body_timeouts = self.guard.timeouts.labels("body")
        self.socket = socket.create_server(address, backlog=512)  # SO_REUSEADDR, as before
        self.server_address: tuple[str, int] = self.socket.getsockname()[:2]
        # Routes block until the writer commits (Ticket.wait): one thread per admitted connection
        # at most, so 256 agents waiting at once never queue behind a small pool (threads are
        # made on demand and kept; bench/RESULTS.md "The ingest server on uvicorn").
        self._pool = ThreadPoolExecutor(
            max_workers=config.max_connections or 1024, thread_name_prefix="fleetscope-route"
        )
        self._uvicorn = uvicorn.Server(
            uvicorn.Config(
                self._app,
                http=IngestProtocol.bound(self.guard, ingest.metrics),
                interface="asgi3",
                ws="none",
                lifespan="off",
                proxy_headers=False,  # no X-Forwarded-For rewriting: agents connect directly
                loop="asyncio",
                log_config=None,  # leave the process's logging as it is
                log_level="warning",
                access_log=False,
                server_header=False,
                # a backstop only: IngestProtocol's header deadline closes idle connections first
                timeout_keep_alive=int(config.header_timeout_s * 2) + 1,
                timeout_graceful_shutdown=int(self.GRACEFUL_STOP_S),
                ssl_context_factory=None if tls is None else (lambda _config, _default: tls),
            )
        )
        self._thread: threading.Thread | None = None

    def serve_forever(self) -> None:
        """Serve on this thread until `shutdown` (or `stop`)."""
        self._uvicorn.run(sockets=[self.socket])

    def start(self) -> None:
        self._thread = threading.Thread(target=self.serve_forever, name="fleetscope-http")
        self._thread.daemon = True
        self._thread.start()

    def shutdown(self) -> None:
        """Stop serving: new requests get 503 until the loop exits, then connections close."""
        self.stopping = True
        self._uvicorn.should_exit = True
        if self._thread is not None:
            self._thread.join()

    def server_close(self) -> None:
        self.socket.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    async def _app(self, scope: dict[str, Any], receive: Receive, send: Callable[..., Any]) -> None:
        """The one ASGI application: build the Handler, run the route on the pool, answer."""
        started = time.perf_counter()
        query = scope["query_string"]
        loop = asyncio.get_running_loop()
        arrived = None
        if scope.get(BODY_ARRIVED):  # in memory already: this receive returns without waiting
            arrived = (await receive()).get("body", b"")
        handler = Handler(
            method=scope["method"],
            path=scope["raw_path"].decode("latin-1")
            + ("?" + query.decode("latin-1") if query else ""),
            headers=RequestHeaders(scope["headers"]),
            receive=receive,
            loop=loop,
            inflight=self.inflight,
            body_timeout_s=self.ingest.config.body_timeout_s,
            on_body_timeout=self._body_timeouts.inc,
            arrived=arrived,
        )
        if self.stopping:
            # A kept-alive connection may send one more request while the server stops: close
            # it, so the client's retry opens a new connection to whatever server listens next.
            response, route_name = STOPPING, "unknown"
        else:
            response, route_name = await loop.run_in_executor(self._pool, self._dispatch, handler)
        # A body left unread would be parsed as the next request: close after the answer.
        close = response is STOPPING or (
            not handler.body_read
            and (handler.method == "POST" or has_body_framing(handler.headers))
        )
        headers = [
            (b"content-type", response.content_type.encode("latin-1")),
            (b"content-length", b"%d" % len(response.body)),
            *((k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers.items()),
        ]
        if close:
            headers.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        await send({"type": "http.response.body", "body": response.body})
        metrics = self.ingest.metrics
        metrics.requests.labels(route_name, str(response.status)).inc()
        metrics.latency.labels(route_name).observe(time.perf_counter() - started)

    def _dispatch(self, handler: Handler) -> tuple[Response, str]:
        """The route's answer and name, on a pool thread; every refusal becomes its status."""
        method = handler.method
        path = handler.path.split("?", 1)[0]
        route_name = "unknown"
        try:
            body_length(handler.headers)  # framing first: 400 for a conflict, whatever the route
            for route_method, pattern, name, fn in (*ROUTES, *self.ingest.routes):
                match = pattern.fullmatch(path)
                if match:
                    route_name = name
                    if route_method != method:
                        raise IngestError(f"{method} is not allowed on {path}", status=405)
                    response = fn(handler, self.ingest, *match.groups())
                    break
            else:
                raise IngestError(f"no route {method} {path}", status=404)
        except IngestError as exc:
            response = Response.json(exc.status, {"error": str(exc)})
            if exc.status == 503:
                response.headers["Retry-After"] = "1"
        except FleetscopeError as exc:
            response = Response.json(400, {"error": str(exc)})
        except Exception as exc:  # a bug must not end the connection without an answer
            log.exception("%s %s failed", method, path)
            response = Response.json(500, {"error": f"internal error: {type(exc).__name__}"})
        finally:
            self.inflight.release(handler.reserved_bytes)
            handler.reserved_bytes = 0
        return response, route_name


STOPPING = Response.json(503, {"error": "ingest is stopping; retry"}, **{"Retry-After": "1"})


def tls_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """Server-side TLS from PEM files (TLS 1.2 or newer); ConfigError when they cannot be used."""
    if bool(cert_file) != bool(key_file):
        raise ConfigError("server.tls_cert_file and server.tls_key_file must be set together")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"server.tls_cert_file/tls_key_file: cannot load: {exc}") from exc
    return context


# -- routes ------------------------------------------------------------------------------------
def post_batch(handler: Handler, ingest: Ingest, table: str) -> Response:
    ingest.auth.check(handler.headers.get("Authorization"))
    envelope = check_envelope(table, handler.headers, ingest.config.max_body_bytes)
    data = decode_batch(
        table,
        handler.read_body(ingest.config.max_body_bytes),
        max_decoded_bytes=ingest.config.max_decoded_bytes,
        max_rows=ingest.config.max_batch_rows,
    )
    ticket, in_flight = ingest.writer.submit(
        table, data, envelope.batch_id, envelope.agent, envelope.agent_version
    )
    if not ticket.wait(ingest.config.commit_timeout_s):
        raise IngestError(
            f"batch {envelope.batch_id} is not committed yet; retry with the same batch id",
            status=503,
        )
    if ticket.error is not None and ticket.status < 500:
        raise IngestError(f"{ticket.error}; do not retry it as is", status=ticket.status)
    if ticket.error is not None:
        raise IngestError(f"{ticket.error}; retry with the same batch id", status=503)
    return Response.json(
        202,
        {
            "batch_id": ticket.batch_id,
            "rows": ticket.rows,
            "duplicate": ticket.duplicate or in_flight,
        },
    )


def post_jobs(handler: Handler, ingest: Ingest) -> Response:
    ingest.auth.check(handler.headers.get("Authorization"))
    jobs = parse_jobs(handler.read_body(min(MAX_JOBS_JSON_BYTES, ingest.config.max_body_bytes)))
    with ingest.catalog.begin() as conn:
        upsert_jobs(conn, jobs)
    return Response.json(200, {"jobs": len(jobs)})


def post_remote_write(handler: Handler, ingest: Ingest) -> Response:
    """Prometheus remote_write: 204 once the complete scrapes are committed (Prometheus treats
    any 2xx as success, drops a batch on 4xx and retries on 5xx)."""
    if ingest.remote_write is None:
        raise IngestError("remote_write is not enabled on this server", status=404)
    ingest.auth.check(handler.headers.get("Authorization"))
    check_headers(handler.headers)
    ingest.remote_write.receive(handler.read_body(ingest.config.max_body_bytes))
    return Response(204, b"", "text/plain; charset=utf-8")


def get_healthz(handler: Handler, ingest: Ingest) -> Response:
    return Response.json(200, {"status": "ok", "queued_rows": ingest.writer.queued_rows})


def get_server(handler: Handler, ingest: Ingest) -> Response:
    """Where the server keeps its data, for a CLI on the same machine that was not told
    (`app.server_location`): folder paths only, no data, so no token is asked, as /healthz."""
    return Response.json(200, {"settings": dict(ingest.config.read_location)})


def get_metrics(handler: Handler, ingest: Ingest) -> Response:
    if ingest.config.read_auth:  # families carry job and team labels: job data (server.read_auth)
        ingest.auth.check_read(handler.headers.get("Authorization"))  # a read token will do
    return Response(200, generate_latest(ingest.metrics.registry), CONTENT_TYPE_LATEST)


Route = Callable[..., Response]
ROUTES: tuple[tuple[str, re.Pattern[str], str, Route], ...] = (
    ("POST", re.compile(r"/v1/batches/([^/]+)"), "batches", post_batch),
    ("POST", re.compile(r"/v1/jobs"), "jobs", post_jobs),
    ("POST", re.compile(r"/api/v1/write"), "remote_write", post_remote_write),
    ("POST", re.compile(r"/v1/profile-requests"), "profile_requests", post_profile_request),
    ("GET", re.compile(r"/v1/profile-requests/(\d+)"), "profile_request", get_profile_request),
    ("POST", re.compile(r"/v1/agent/poll"), "agent_poll", post_agent_poll),
    ("POST", re.compile(r"/v1/traces"), "traces", post_trace),
    ("GET", re.compile(r"/healthz"), "healthz", get_healthz),
    ("GET", re.compile(r"/v1/server"), "server", get_server),
    ("GET", re.compile(r"/metrics"), "metrics", get_metrics),
)
