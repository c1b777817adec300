"""Bearer tokens that fleetscope generates: `secrets.token_urlsafe`, never starting with '-'.

Why: a token travels on command lines (`fleetscope profile --token T`, and the demo hands its own
to `fleetscope simulate --token T`). One in 64 of `token_urlsafe`'s tokens starts with '-', which
argparse reads as an option ("argument --token: expected one argument"): the demo failed to start
once in 64 runs, and a user pasting such a token would have met the same error.
"""

from __future__ import annotations

import secrets

__all__ = ["new_token"]


def new_token(nbytes: int) -> str:
    """A URL-safe token of `nbytes` random bytes whose first character is not '-'."""
    while True:
        token = secrets.token_urlsafe(nbytes)
        if not token.startswith("-"):
            return token
