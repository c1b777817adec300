"""The agent's one HTTP client: stdlib only, with an injectable transport for tests.

Why stdlib: the agent runs on every GPU host, so it carries no `requests`/`urllib3`. TLS uses the
system trust store, or `agent.tls_ca_file` when set.

Must never: retry (the shipper owns retries and backoff) or raise anything but
SourceUnavailableError for "no answer" (connection refused, timeout, TLS failure).
"""

from __future__ import annotations

import http.client
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Protocol

from collector.http1 import PlainConnection
from fleetscope.errors import SourceUnavailableError

__all__ = ["KeepAliveTransport", "Response", "Transport", "UrllibTransport"]


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes


class Transport(Protocol):
    def request(
        self,
        method: str,
        url: str,
        *,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout_s: float = 10.0,
    ) -> Response: ...


class UrllibTransport:
    """urllib.request with an optional CA bundle; every HTTP status is a Response, not an error."""

    def __init__(self, ca_file: str = "") -> None:
        self._context = ssl.create_default_context(cafile=ca_file or None)

    def request(
        self,
        method: str,
        url: str,
        *,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout_s: float = 10.0,
    ) -> Response:
        req = urllib.request.Request(url, data=body, headers=headers or {}, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout_s, context=self._context) as resp:
                return Response(resp.status, resp.read())
        except urllib.error.HTTPError as exc:
            with exc:
                return Response(exc.code, exc.read())
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            raise SourceUnavailableError(f"{method} {url}: {exc}") from exc
        except ValueError as exc:  # a malformed URL is a user mistake, said plainly
            raise SourceUnavailableError(f"{method} {url}: {exc}") from exc


_Connection = http.client.HTTPConnection | PlainConnection


class KeepAliveTransport:
    """One persistent HTTP/1.1 connection per (thread, scheme, host, port).

    Why: the agent GETs the same exporter every second and POSTs to the same ingest; reusing the
    connection skips the TCP (and TLS) handshake and urllib's per-request opener machinery, which
    measured as the largest share of the agent's steady-state CPU (bench/agent.py). Plain
    `http://` goes through collector.http1 (one buffered reader per connection, no `email` header
    parser), `https://` through http.client. A request that fails on a reused connection is
    retried once on a fresh one (the peer may have closed an idle connection), which is safe for
    our GETs and for POSTs carrying an idempotent batch id.
    """

    def __init__(self, ca_file: str = "") -> None:
        self._context = ssl.create_default_context(cafile=ca_file or None)
        self._local = threading.local()
        self._open: set[_Connection] = set()  # every thread's, for close()
        self._open_lock = threading.Lock()

    def _connection(self, parts: urllib.parse.SplitResult, timeout_s: float) -> _Connection:
        pool: dict[tuple[str, str], _Connection] = self._local.__dict__.setdefault("pool", {})
        conn = pool.get((parts.scheme, parts.netloc))
        if conn is None:
            if parts.scheme == "https":
                conn = http.client.HTTPSConnection(
                    parts.netloc, timeout=timeout_s, context=self._context
                )
            else:
                conn = PlainConnection(parts.hostname or "", parts.port or 80, timeout_s)
            pool[(parts.scheme, parts.netloc)] = conn
            with self._open_lock:
                self._open.add(conn)
        if isinstance(conn, http.client.HTTPConnection):
            conn.timeout = timeout_s
        return conn

    def _drop(self, scheme: str, netloc: str) -> None:
        pool = self._local.__dict__.get("pool", {})
        conn = pool.pop((scheme, netloc), None)
        if conn is not None:
            conn.close()
            with self._open_lock:
                self._open.discard(conn)

    def request(
        self,
        method: str,
        url: str,
        *,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout_s: float = 10.0,
    ) -> Response:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise SourceUnavailableError(f"{method} {url}: not an http(s) URL")
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        for attempt in (1, 2):
            try:
                conn = self._connection(parts, timeout_s)
                if isinstance(conn, PlainConnection):
                    status, data = conn.request(
                        method, target, parts.netloc, body=body, headers=headers or {},
                        timeout_s=timeout_s,
                    )  # fmt: skip
                    closes = conn.will_close
                else:
                    conn.request(method, target, body=body, headers=headers or {})
                    resp = conn.getresponse()
                    status, data, closes = resp.status, resp.read(), resp.will_close
                if closes:
                    self._drop(parts.scheme, parts.netloc)
                return Response(status, data)
            except (OSError, http.client.HTTPException, ValueError) as exc:
                self._drop(parts.scheme, parts.netloc)
                reused_and_reset = attempt == 1 and isinstance(
                    exc, (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)
                )
                if not reused_and_reset:
                    raise SourceUnavailableError(f"{method} {url}: {exc}") from exc
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close every thread's connections (call once the threads using it have stopped)."""
        with self._open_lock:
            opened, self._open = self._open, set()
        for conn in opened:
            conn.close()
        self._local.__dict__["pool"] = {}
