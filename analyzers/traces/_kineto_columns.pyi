"""Types of the C extension built from analyzers/traces/_kineto_columns.c, whose docstrings say
what each function returns; analyzers.traces needs it (pyproject.toml)."""

from typing import Any

def decode_events(
    text: Any, base: int, symbols: dict[object, int], /
) -> tuple[int, int, bool, bool, dict[str, bytearray]]: ...
def longest_path(n: int, src: Any, dst: Any, weight: Any, /) -> tuple[bytearray, int] | None: ...
def stack_walk(starts: Any, /) -> tuple[bytearray, bytearray]: ...
