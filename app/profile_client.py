"""A small client of the server's profiling API, for `fleetscope profile` (and scripts).

    create(job_id, rank=, steps= | duration_s=)  POST /v1/profile-requests -> request id
    get(request_id)                              GET  /v1/profile-requests/<id> -> the request

Standard library only (urllib), like every core module. HTTP answers become the project's errors
with the server's own message: 400 ConfigError (a bad argument), 401/403 AuthError, 404
NotFoundError (unknown job or request), other statuses IngestError; no answer at all is
SourceUnavailableError naming the URL. Must never retry a POST (a retry would create a second
request).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from fleetscope.errors import (
    AuthError,
    ConfigError,
    IngestError,
    NotFoundError,
    SourceUnavailableError,
)


class ProfileClient:
    def __init__(self, base_url: str, token: str, *, timeout_s: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s

    def create(
        self,
        job_id: str,
        *,
        rank: int | None = None,
        steps: int | None = None,
        duration_s: float | None = None,
    ) -> int:
        payload: dict[str, Any] = {"job_id": job_id}
        for key, value in (("rank", rank), ("steps", steps), ("duration_s", duration_s)):
            if value is not None:
                payload[key] = value
        answer = self._call("POST", "/v1/profile-requests", payload)
        return int(answer["id"])

    def get(self, request_id: int) -> dict[str, Any]:
        return self._call("GET", f"/v1/profile-requests/{request_id}", None)

    def _call(self, method: str, path: str, payload: object) -> dict[str, Any]:
        url = self.base_url + path
        headers = {"Accept": "application/json"}
        body = None
        if payload is not None:
            body = json.dumps(payload).encode()
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(url, data=body, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as resp:
                data = resp.read()
        except urllib.error.HTTPError as exc:
            with exc:
                raise _error(exc.code, exc.read()) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise SourceUnavailableError(
                f"cannot reach the fleetscope server at {self.base_url}: {exc} "
                "(--server, or agent.ingest_url)"
            ) from exc
        try:
            answer = json.loads(data)
        except ValueError as exc:
            raise IngestError(f"{method} {url}: the answer is not JSON: {exc}") from exc
        if not isinstance(answer, dict):
            raise IngestError(f"{method} {url}: the answer is not a JSON object")
        return answer


def _error(status: int, body: bytes) -> Exception:
    try:
        message = str(json.loads(body)["error"])
    except (ValueError, KeyError, TypeError):
        message = body[:300].decode("utf-8", "replace") or f"HTTP {status}"
    if status == 400:
        return ConfigError(message)
    if status in (401, 403):
        return AuthError(f"the server refused the token: {message} (--token, or agent.token)")
    if status == 404:
        return NotFoundError(message)
    return IngestError(f"HTTP {status}: {message}", status=status)
