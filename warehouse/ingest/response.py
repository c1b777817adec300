"""What an ingest route handler returns: status, body, content type and headers.

Its own module so route modules (warehouse.profiling.api) build responses without importing the
server that imports their route tables (the import cycle this broke).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, status: int, payload: object, **headers: str) -> Response:
        return cls(status, json.dumps(payload).encode(), headers=dict(headers))
