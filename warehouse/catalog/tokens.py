"""Agent bearer tokens: stored as SHA-256 digests, shown once at creation, revocable.

A token is 32 random bytes (fleetscope.tokens.new_token), so an unsalted SHA-256 is enough to store it:
it cannot be guessed from the digest. This module must never store or log a token in clear.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Column, Connection, String, Table, select, update
from sqlalchemy.exc import IntegrityError

from fleetscope.errors import ConfigError, NotFoundError
from fleetscope.tokens import new_token
from warehouse.catalog.base import UTCDateTime, metadata, utcnow

agent_tokens = Table(
    "agent_tokens",
    metadata,
    Column("name", String(255), primary_key=True),
    Column("token_sha256", String(64), nullable=False, unique=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("revoked_at", UTCDateTime),
)


@dataclass(frozen=True)
class TokenInfo:
    name: str
    created_at: datetime
    revoked_at: datetime | None


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create_token(conn: Connection, name: str) -> str:
    """Store a new token under `name` and return it; this is the only time it is visible."""
    if not name or len(name) > 255:
        raise ConfigError("a token name must be 1-255 characters")
    token = new_token(32)
    try:
        conn.execute(
            agent_tokens.insert().values(name=name, token_sha256=digest(token), created_at=utcnow())
        )
    except IntegrityError as exc:
        raise ConfigError(
            f"a token named {name!r} already exists; revoke it or pick another name"
        ) from exc
    return token


def revoke_token(conn: Connection, name: str) -> None:
    result = conn.execute(
        update(agent_tokens)
        .where(agent_tokens.c.name == name, agent_tokens.c.revoked_at.is_(None))
        .values(revoked_at=utcnow())
    )
    if result.rowcount == 0:
        raise NotFoundError(f"no active token named {name!r}")


def token_name(conn: Connection, token: str) -> str | None:
    """The name of the active token `token`, or None when it is unknown or revoked."""
    row = conn.execute(
        select(agent_tokens.c.name).where(
            agent_tokens.c.token_sha256 == digest(token), agent_tokens.c.revoked_at.is_(None)
        )
    ).first()
    return str(row[0]) if row else None


def list_tokens(conn: Connection) -> list[TokenInfo]:
    query = select(agent_tokens.c.name, agent_tokens.c.created_at, agent_tokens.c.revoked_at)
    return [TokenInfo(**r) for r in conn.execute(query.order_by(agent_tokens.c.name)).mappings()]
