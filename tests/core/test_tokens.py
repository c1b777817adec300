"""Generated tokens survive a command line: none starts with '-'."""

from __future__ import annotations

import argparse
import secrets
from collections.abc import Iterator

import pytest

from fleetscope.tokens import new_token


def test_a_drawn_token_that_starts_with_a_dash_is_drawn_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    drawn: Iterator[str] = iter(["-Xa9", "_-b2", "c3-"])
    monkeypatch.setattr(secrets, "token_urlsafe", lambda nbytes: next(drawn))
    assert new_token(18) == "_-b2"


def test_a_dash_first_token_is_what_argparse_refuses_as_a_separate_argument() -> None:
    """Why the rule exists: `--token -Xa9` is an error, `--token=-Xa9` is not."""
    parser = argparse.ArgumentParser(exit_on_error=False)
    parser.add_argument("--token")
    with pytest.raises(argparse.ArgumentError, match="expected one argument"):
        parser.parse_args(["--token", "-Xa9"])
    assert parser.parse_args(["--token=-Xa9"]).token == "-Xa9"


def test_tokens_are_url_safe_and_as_long_as_token_urlsafe_makes_them() -> None:
    for _ in range(500):
        token = new_token(32)
        assert len(token) == 43 and not token.startswith("-")
        assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
