"""Who may read: read tokens, and the server's own tokens; never an agent's.

Three kinds of bearer token reach a fleetscope server:
- `server.tokens` (the operator's, also what simple deployments give every agent): everything;
- catalog tokens (`fleetscope token create NAME`, one per agent): ingest only; a token copied off
  a GPU node must not list the fleet's findings, so the read API answers them 403;
- `server.read_tokens`: the read API only (a dashboard, a ticketing bot, a notebook); the ingest
  routes never accept them (warehouse.auth does not know them), so a leaked read token can never
  write a sample.
Compared in constant time; never logged.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable

from fleetscope.errors import AuthError, IngestError
from warehouse.auth import TokenChecker


class ReadAccess:
    def __init__(self, read_tokens: Iterable[str], auth: TokenChecker) -> None:
        self._read = [t.encode() for t in read_tokens if t]
        self._auth = auth

    @classmethod
    def parse(cls, setting: str, auth: TokenChecker) -> ReadAccess:
        return cls([t.strip() for t in setting.split(",")], auth)

    def check(self, authorization: str | None) -> str:
        """'read' or 'settings' (the caller's kind); AuthError (401) without a valid token, and
        IngestError 403 for an agent's catalog token."""
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        read = (hmac.compare_digest(token.encode(), known) for known in self._read)
        if scheme.lower() == "bearer" and token and any(read):
            return "read"
        try:
            name = self._auth.check(authorization)
        except AuthError:
            raise AuthError(
                "missing or invalid bearer token: send 'Authorization: Bearer <token>' with one "
                "of server.read_tokens (or server.tokens)"
            ) from None
        if name != "settings":
            raise IngestError(
                f"token {name!r} is an agent's ingest token and cannot read; use one of "
                "server.read_tokens",
                status=403,
            )
        return name
