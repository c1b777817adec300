"""A stopped server closes the connections clients keep alive, so their retries reach its successor.

Agents keep one connection open to ingest. When an in-process server stops, the listening socket
closes but a kept-alive connection's handler thread lives on; it must answer 503 with
`Connection: close` rather than keep serving from a stopped writer.
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

    connection.request("GET", "/healthz")
    answer = connection.getresponse()
    assert answer.status == 503
    assert answer.getheader("Connection") == "close"
    assert json.loads(answer.read()) == {"error": "ingest is stopping; retry"}
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
