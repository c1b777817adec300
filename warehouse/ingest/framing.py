"""How a request's body is framed, read strictly as RFC 9112 section 6 says, before anything else.

Why: http.server decodes header bytes as Latin-1 and leaves framing to the handler. Python's
`str.isdigit()` is true for a superscript two (byte 0xB2 read as '²') and `int('²')` then raises
ValueError, which reached the client as a 500 (issue 28). And a request carrying two different
Content-Length values, or Content-Length with Transfer-Encoding, was read by the first value:
behind a proxy that reads the other one, that is the request-smuggling shape RFC 9112 section 6.3
forbids ("the server MUST respond with a 400 (Bad Request) status code and then close the
connection"). This server reads no chunked bodies, so any Transfer-Encoding is refused.

Must never: raise anything but IngestError for a client's bytes, or read the body.
"""

from __future__ import annotations

import re
from typing import Protocol

from fleetscope.errors import IngestError

__all__ = ["ascii_int", "body_length", "has_body_framing"]

# RFC 9110 section 8.6: Content-Length = 1*DIGIT, and DIGIT is ASCII 0-9 (RFC 5234 B.1).
_DIGITS = re.compile(r"[0-9]{1,18}")  # 18 digits: an int64 without overflow questions


class HeaderMessage(Protocol):
    """What http.server's parsed headers offer (email.message.Message)."""

    def get_all(self, name: str, /) -> list[str] | None: ...


def ascii_int(raw: str | None) -> int | None:
    """`raw` as a non-negative integer when it is 1-18 ASCII digits (surrounding blanks allowed),
    else None: never ValueError, whatever Unicode digit the header bytes decoded to."""
    if raw is None:
        return None
    value = raw.strip(" \t")
    return int(value) if _DIGITS.fullmatch(value) else None


def has_body_framing(headers: HeaderMessage) -> bool:
    """Whether the request announced a body (any Content-Length or Transfer-Encoding)."""
    return bool(headers.get_all("Content-Length") or headers.get_all("Transfer-Encoding"))


def body_length(headers: HeaderMessage) -> int | None:
    """The body's length from a single, valid Content-Length; None when there is none.

    400 (IngestError) for: any Transfer-Encoding (chunked is not read here, and with a
    Content-Length it is the smuggling shape), more than one Content-Length field (even equal
    ones: a proxy may have joined two messages), or a value that is not ASCII digits.
    """
    encodings = headers.get_all("Transfer-Encoding") or []
    lengths = headers.get_all("Content-Length") or []
    if encodings and lengths:
        raise IngestError("Content-Length together with Transfer-Encoding (RFC 9112 6.3)")
    if encodings:
        raise IngestError(
            f"Transfer-Encoding {', '.join(encodings)[:80]!r} is not read here; "
            "send the body with a Content-Length"
        )
    if len(lengths) > 1:
        raise IngestError(f"{len(lengths)} Content-Length headers (RFC 9112 6.3): send one")
    if not lengths:
        return None
    length = ascii_int(lengths[0])
    if length is None:
        raise IngestError(f"Content-Length must be ASCII digits, got {lengths[0][:40]!r}")
    return length
