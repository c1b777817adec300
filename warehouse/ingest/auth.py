"""Bearer-token checks for ingest: tokens from settings plus active tokens in the catalog.

Read tokens (`server.read_tokens`) are a kind of their own: `check_read` (GET /metrics, the read
API) accepts them, `check` (every write) never does, so a token handed to Prometheus or a
dashboard can never store a sample.

Catalog answers are cached for `ttl_s` (default 5 s) so a busy server does one catalog query per
token per few seconds, not one per request; a revoked token stops working within that time.
Settings tokens are compared in constant time. This module must never log a token.
"""

from __future__ import annotations

import hmac
import threading
import time
from collections.abc import Callable, Iterable

from sqlalchemy import Engine

from fleetscope.errors import AuthError
from warehouse.catalog import tokens


class TokenChecker:
    def __init__(
        self,
        static_tokens: Iterable[str],
        engine: Engine | None,
        *,
        ttl_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        read_tokens: Iterable[str] = (),
    ) -> None:
        self._static = [t.encode() for t in static_tokens if t]
        self._read = [t.encode() for t in read_tokens if t]
        self._engine = engine
        self._ttl_s = ttl_s
        self._clock = clock
        self._cache: dict[str, tuple[str | None, float]] = {}
        self._lock = threading.Lock()

    def check(self, authorization: str | None) -> str:
        """The caller's token name (settings tokens are named 'settings'); AuthError if none."""
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise AuthError("missing bearer token: send 'Authorization: Bearer <token>'")
        if any(hmac.compare_digest(token.encode(), known) for known in self._static):
            return "settings"
        name = self._catalog_name(token)
        if name is None:
            raise AuthError("invalid or revoked bearer token")
        return name

    def check_read(self, authorization: str | None) -> str:
        """'read' for a read token, else what `check` says (a read route accepts every token)."""
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        read = (hmac.compare_digest(token.encode(), known) for known in self._read)
        if scheme.lower() == "bearer" and token and any(read):
            return "read"
        return self.check(authorization)

    def clear(self) -> None:
        """Forget cached catalog answers (a revocation then applies at once)."""
        with self._lock:
            self._cache.clear()

    def _catalog_name(self, token: str) -> str | None:
        if self._engine is None:
            return None
        key = tokens.digest(token)
        now = self._clock()
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and cached[1] > now:
            return cached[0]
        with self._engine.connect() as conn:
            name = tokens.token_name(conn, token)
        with self._lock:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[key] = (name, now + self._ttl_s)
        return name
