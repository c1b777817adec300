"""Who may read: read tokens, and the server's own tokens; never an agent's.

Three kinds of bearer token reach a fleetscope server:
- `server.tokens` (the operator's, also what simple deployments give every agent): everything;
- catalog tokens (`fleetscope token create NAME`, one per agent): ingest (and /metrics, as
  before); a token copied off a GPU node must not list the fleet's findings, so the read API
  answers them 403;
- `server.read_tokens`: /metrics and the read API only (Prometheus, a dashboard, a ticketing
  bot); the ingest routes never accept them (warehouse.ingest.auth.TokenChecker.check), so a leaked read
  token can never write a sample.
Compared in constant time by warehouse.ingest.auth; never logged.
"""

from __future__ import annotations

from fleetscope.errors import AuthError, IngestError
from warehouse.ingest.auth import TokenChecker


class ReadAccess:
    def __init__(self, auth: TokenChecker) -> None:
        self._auth = auth

    def check(self, authorization: str | None) -> str:
        """'read' or 'settings' (the caller's kind); AuthError (401) without a valid token, and
        IngestError 403 for an agent's catalog token."""
        try:
            name = self._auth.check_read(authorization)
        except AuthError:
            raise AuthError(
                "missing or invalid bearer token: send 'Authorization: Bearer <token>' with one "
                "of server.read_tokens (or server.tokens)"
            ) from None
        if name not in ("read", "settings"):
            raise IngestError(
                f"token {name!r} is an agent's ingest token and cannot read; use one of "
                "server.read_tokens",
                status=403,
            )
        return name
