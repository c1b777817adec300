"""A webhook receiver on loopback: a real HTTP server that records every POSTed JSON body, for
the tests where Alertmanager or fleetscope's notifier delivers to a webhook."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class WebhookReceiver:
    """POST bodies (parsed JSON) with their path, in arrival order; `url` is its base URL."""

    def __init__(self) -> None:
        self.received: list[tuple[str, Any]] = []
        self.status = 200
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with receiver._lock:
                    receiver.received.append((self.path, json.loads(body)))
                self.send_response(receiver.status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def bodies(self, path: str | None = None) -> list[Any]:
        with self._lock:
            return [b for p, b in self.received if path is None or p == path]

    def wait_for(
        self, found: Callable[[list[Any]], bool], path: str | None = None, timeout_s: float = 90
    ) -> list[Any]:
        """The bodies once `found(bodies)` holds (an AssertionError naming them after `timeout_s`)."""
        deadline = time.monotonic() + timeout_s
        while not found(bodies := self.bodies(path)):
            if time.monotonic() > deadline:
                raise AssertionError(f"not received after {timeout_s} s: {bodies}")
            time.sleep(0.1)
        return bodies

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)
