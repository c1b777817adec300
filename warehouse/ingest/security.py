"""Secure defaults of the ingest server: which tokens it accepts, and where it may listen with them.

Why: until issue 12 the default accepted token was the public `dev-token` and nothing warned about
it. Now an empty `server.tokens` (the default) means: use the random token kept in
`<core.data_dir>/server-token`, generating it (mode 0600) on first start and saying where it is.
A server on a non-loopback address refuses to start when a settings token is one anyone can guess:
its estimated entropy (`token_bits`) is under 96 bits, the strength NIST SP 800-63B asks of a
look-up secret's 64 bits plus a margin; 16 random bytes written as hex (`openssl rand -hex 16`)
score about 115-120 by this estimate, 32 bytes about 230. Until issue 28 the check was a
five-word list plus a length, so `aaaaaaaaaaaaaaaa`, `changemechangeme` or `0000000000000000`
passed. Loopback is where the demo and tests run.
`server_token(settings)` gives the token agents should present (the demo and the CLI read it
here). This module must never log a token itself, only where it is kept.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import os
import string
import sys
from collections import Counter
from pathlib import Path

from fleetscope.errors import ConfigError
from fleetscope.settings import Settings
from fleetscope.tokens import new_token

log = logging.getLogger(__name__)

TOKEN_FILE = "server-token"
MIN_TOKEN_BITS = 96
_CLASSES = (string.ascii_lowercase, string.ascii_uppercase, string.digits)


def token_bits(token: str) -> float:
    """A conservative estimate of a token's entropy in bits: the least of three estimates.

    - alphabet: length x log2(size of the character classes it uses: lower, upper, digits,
      other printable ASCII 33, anything else 128), what a brute force over those classes costs;
    - frequency: length x the Shannon entropy of its own character frequencies, which sees
      repetition (`aaaa...` is 0 bits, `changemechangeme` about 44);
    - period: a token that repeats a shorter unit is worth that unit once (`abcdabcd...`).
    """
    if not token:
        return 0.0
    pool = sum(len(c) for c in _CLASSES if any(ch in c for ch in token))
    if any(ch in string.punctuation for ch in token):
        pool += len(string.punctuation)
    if any(not ch.isascii() or not ch.isprintable() for ch in token):
        pool += 128
    alphabet = len(token) * math.log2(max(pool, 2))
    counts = Counter(token)
    frequency = -sum(n * math.log2(n / len(token)) for n in counts.values())
    for unit in range(1, len(token) // 2 + 1):
        if len(token) % unit == 0 and token == token[:unit] * (len(token) // unit):
            return min(alphabet, frequency, token_bits(token[:unit]))
    return min(alphabet, frequency)


def token_path(settings: Settings) -> Path:
    return settings.path(settings.core.data_dir) / TOKEN_FILE


def configured_tokens(settings: Settings) -> list[str]:
    """The non-empty entries of server.tokens."""
    return [t.strip() for t in settings.server.tokens.split(",") if t.strip()]


def load_or_create_token(path: Path) -> str:
    """The token in `path`, or a new random one written there with mode 0600 (said on stderr)."""
    try:
        token = path.read_text().strip()
    except FileNotFoundError:
        token = ""
    if token:
        return token
    path.parent.mkdir(parents=True, exist_ok=True)
    token = new_token(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    os.chmod(path, 0o600)
    message = (
        f"fleetscope server: generated a random ingest token in {path} (mode 0600); "
        "give it to agents as agent.token (FLEETSCOPE_AGENT_TOKEN)"
    )
    log.warning(message)
    print(message, file=sys.stderr, flush=True)
    return token


def effective_tokens(settings: Settings) -> list[str]:
    """Tokens the server accepts besides the catalog's: server.tokens, else the generated one."""
    return configured_tokens(settings) or [load_or_create_token(token_path(settings))]


def read_tokens(settings: Settings) -> list[str]:
    """server.read_tokens: the read-only tokens (GET /metrics and the read API, never a write)."""
    return [t.strip() for t in settings.server.read_tokens.split(",") if t.strip()]


def server_token(settings: Settings) -> str:
    """The token an agent of this server should present (the first effective one)."""
    return effective_tokens(settings)[0]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, tokens: list[str]) -> None:
    """ConfigError when a non-loopback listener would accept a guessable token."""
    if is_loopback(host):
        return
    weak = [t for t in tokens if token_bits(t) < MIN_TOKEN_BITS]
    if weak or not tokens:
        what = (
            f"a guessable bearer token (about {token_bits(weak[0]):.0f} bits)"
            if weak
            else "no bearer token"
        )
        raise ConfigError(
            f"refusing to listen on {host or 'every address'} with {what} in server.tokens: set "
            f"a random one of at least {MIN_TOKEN_BITS} bits (`openssl rand -hex 32`), or leave "
            "server.tokens empty to use the generated <core.data_dir>/server-token"
        )
