"""Query parameters of the read API: parsed, checked, and refused with a clear 400.

Every route declares the parameters it takes; an unknown or repeated one is an error (a typo such
as `?teem=ml` must not silently list every team's findings). Durations and times read as the CLI
reads them (`--window 7d`, `--end 2025-03-03T00:00:00Z`: analyzers.cli.parse_duration and
parse_time), so a URL and a command line say the same thing.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from datetime import UTC, datetime

from fleetscope.errors import ConfigError, IngestError

DEFAULT_WINDOW = "7d"
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000  # one page: bounded so a request never serialises the whole catalog


def query_params(path: str, allowed: frozenset[str]) -> dict[str, str]:
    """The request's query parameters, each at most once and each one of `allowed`."""
    pairs = urllib.parse.parse_qsl(urllib.parse.urlsplit(path).query, keep_blank_values=True)
    params: dict[str, str] = {}
    for name, value in pairs:
        if name not in allowed:
            known = ", ".join(sorted(allowed)) or "none"
            raise IngestError(f"unknown query parameter {name!r} (this route takes: {known})")
        if name in params:
            raise IngestError(f"query parameter {name!r} given more than once")
        params[name] = value
    return params


@dataclass(frozen=True)
class Window:
    """[start, end): findings whose window overlaps it."""

    label: str
    start: datetime
    end: datetime


def window(params: dict[str, str], now: datetime | None = None) -> Window:
    from analyzers.cli import parse_duration, parse_time

    label = params.get("window", DEFAULT_WINDOW)
    try:
        end = parse_time(params["end"]) if "end" in params else (now or datetime.now(UTC))
        length = parse_duration(label)
    except ConfigError as exc:
        raise IngestError(str(exc)) from exc
    return Window(label, end - length, end)


@dataclass(frozen=True)
class Page:
    limit: int
    offset: int


def page(params: dict[str, str]) -> Page:
    limit = _int(params, "limit", DEFAULT_LIMIT)
    offset = _int(params, "offset", 0)
    if not 1 <= limit <= MAX_LIMIT:
        raise IngestError(f"limit must be 1-{MAX_LIMIT}, not {limit}")
    if offset < 0:
        raise IngestError(f"offset must be 0 or more, not {offset}")
    return Page(limit, offset)


def _int(params: dict[str, str], name: str, default: int) -> int:
    text = params.get(name)
    if text is None:
        return default
    try:
        return int(text)
    except ValueError as exc:
        raise IngestError(f"{name} must be a whole number, not {text!r}") from exc


def choice(params: dict[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    value = params.get(name, default)
    if value not in choices:
        raise IngestError(f"{name} must be one of {', '.join(choices)}, not {value!r}")
    return value
