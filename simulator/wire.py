"""A minimal wire-format client, for ingest tests and bench/ingest: the fleet maker's batches
(`simulator.maker.batches`) sent as an agent sends them.

`post` speaks the wire format of fleetscope.contract over one http.client connection. This module
must never be imported by the server's request path.
"""

from __future__ import annotations

import http.client
import json
import ssl
import urllib.parse
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fleetscope.contract import (
    ARROW_STREAM_MEDIA_TYPE,
    HEADER_AGENT,
    HEADER_BATCH_ID,
    HEADER_SCHEMA_VERSION,
    SCHEMA_VERSION,
    to_ipc,
)

if TYPE_CHECKING:
    import pyarrow as pa

TEST_TOKEN = "test-token"  # the bearer token the warehouse tests configure in server.tokens


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, object]
    headers: dict[str, str]


def headers_for(batch_id: str, token: str, agent: str = "") -> dict[str, str]:
    return {
        "Authorization": f"Bearer {token}",
        "Content-Type": ARROW_STREAM_MEDIA_TYPE,
        HEADER_SCHEMA_VERSION: str(SCHEMA_VERSION),
        HEADER_BATCH_ID: batch_id,
        HEADER_AGENT: agent,
        "User-Agent": "fleetscope-agent/0.1.0",
    }


def post(
    conn: http.client.HTTPConnection,
    path: str,
    body: bytes,
    headers: dict[str, str],
) -> Answer:
    """One request on a kept-alive connection; the JSON answer and its headers."""
    conn.request("POST", path, body=body, headers=headers)
    response = conn.getresponse()
    raw = response.read()
    payload = json.loads(raw) if raw else {}
    return Answer(response.status, payload, {k.lower(): v for k, v in response.getheaders()})


def post_batch(
    base_url: str,
    table: str,
    batch: pa.Table,
    *,
    token: str,
    batch_id: str | None = None,
    agent: str = "",
    ca_file: str | None = None,
) -> Answer:
    """Serialize and send one batch on a fresh connection (tests); an https URL is verified
    against `ca_file` (a test's self-signed certificate)."""
    url = urllib.parse.urlsplit(base_url)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    conn = (
        http.client.HTTPSConnection(
            host, port, timeout=60, context=ssl.create_default_context(cafile=ca_file)
        )
        if url.scheme == "https"
        else http.client.HTTPConnection(host, port, timeout=60)
    )
    try:
        return post(
            conn,
            f"/v1/batches/{table}",
            to_ipc(batch),
            headers_for(batch_id or uuid.uuid4().hex, token, agent),
        )
    finally:
        conn.close()
