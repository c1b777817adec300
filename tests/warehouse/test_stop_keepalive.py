"""A stopped server closes the connections clients keep alive, so their retries reach its successor.

Agents keep one connection open to ingest. When an in-process server stops, the listening socket
closes; a kept-alive connection must be closed too (the server's event loop ends with it), rather
than stay open to a stopped writer, and a request that arrives while the server stops is answered
503 with `Connection: close`.
"""

from __future__ import annotations

import http.client
import json

from fleetscope.settings import Settings
from warehouse.ingest.runtime import Server


def test_a_kept_alive_connection_is_closed_when_the_server_stops(settings: Settings) -> None:
    first = Server(settings)
    first.start()
    port = int(first.url.rsplit(":", 1)[1])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", "/healthz")
    healthy = connection.getresponse()
    assert (healthy.status, healthy.getheader("Connection")) == (200, None)
    healthy.read()
    first.stop()

    assert connection.sock is not None
    assert connection.sock.recv(1) == b""  # closed by the server, not left to time out
    connection.close()

    second = Server(settings.with_overrides(server__port=port))
    second.start()
    try:
        retry = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        retry.request("GET", "/healthz")
        assert retry.getresponse().status == 200
        retry.close()
    finally:
        second.stop()


def test_a_request_that_arrives_while_the_server_stops_gets_503_and_close(
    settings: Settings,
) -> None:
    server = Server(settings)
    server.start()
    port = int(server.url.rsplit(":", 1)[1])
    server.http.stopping = True  # what stop() sets first, before the event loop winds down
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("GET", "/healthz")
        answer = connection.getresponse()
        assert answer.status == 503
        assert answer.getheader("Connection") == "close"
        assert answer.getheader("Retry-After") == "1"
        assert json.loads(answer.read()) == {"error": "ingest is stopping; retry"}
        connection.close()
    finally:
        server.stop()
