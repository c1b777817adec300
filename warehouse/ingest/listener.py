"""What the embedded server (warehouse.ingest.runtime.Server) and the fleet gateway
(warehouse.fleet.gateway.Gateway) share around their HTTP listener: where they listen, TLS from
settings, the serving thread, the URL, and running until SIGINT or SIGTERM.

Why one module: the two processes differ in what stands behind the listener (a DuckDB writer or
an Iceberg writer; maintenance, remote_write and plug-ins or none), not in how they listen or
stop; two copies of the signal handling and the listener's start-up drift.
"""

from __future__ import annotations

import logging
import signal
import ssl
import threading
from types import FrameType

from fleetscope.errors import ConfigError
from fleetscope.settings import Settings
from warehouse.ingest.server import Ingest, IngestHTTPServer, tls_context

Address = tuple[str, int]


def listen_address(settings: Settings, host: str | None, port: int | None) -> Address:
    """The address to listen on: the arguments where given, else `server.host`/`server.port`."""
    return (
        host if host is not None else settings.server.host,
        port if port is not None else settings.server.port,
    )


def tls_from(settings: Settings) -> ssl.SSLContext | None:
    """Native TLS when `server.tls_cert_file` or `server.tls_key_file` is set (both needed)."""
    cert = settings.server.tls_cert_file
    key = settings.server.tls_key_file
    return tls_context(cert, key) if cert or key else None


def bind(address: Address, ingest: Ingest, tls: ssl.SSLContext | None) -> IngestHTTPServer:
    """The bound listener; an address in use or not ours is a ConfigError saying which."""
    try:
        return IngestHTTPServer(address, ingest, tls)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {address[0]}:{address[1]}: {exc}") from exc


class Listening:
    """The HTTP side of a server process: subclasses set `http` and define `start`/`stop`."""

    http: IngestHTTPServer

    @property
    def url(self) -> str:
        host, port = self.http.server_address[:2]
        scheme = "https" if self.http.tls is not None else "http"
        return f"{scheme}://{host!s}:{port}"

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def _serve_http(self) -> None:
        self.http.start()

    def _close_http(self) -> None:
        """Refuse new requests, let those in flight finish, close every connection."""
        self.http.stop()

    def serve_until_signalled(self) -> None:
        """Run until SIGINT or SIGTERM, then stop cleanly (flush, close)."""
        stop = threading.Event()

        def _on_signal(signum: int, _frame: FrameType | None) -> None:
            logging.getLogger(type(self).__module__).info("signal %d: stopping", signum)
            stop.set()

        previous = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.start()
            stop.wait()
        finally:
            self.stop()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
