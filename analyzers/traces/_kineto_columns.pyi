"""Types of the C extension built from analyzers/traces/_kineto_columns.c (read that file's
comment); analyzers.traces needs it (pyproject.toml)."""

from typing import Any

def decode_events(
    text: Any, base: int, symbols: dict[object, int], /
) -> tuple[int, int, bool, bool, dict[str, bytearray]]:
    """(events, bytes taken, ts_has_float, ts_all_present, columns) of the whole events at the
    head of `text`, up to the first element it does not take."""

def longest_path(n: int, src: Any, dst: Any, weight: Any, /) -> tuple[bytearray, int] | None:
    """networkx's `dag_longest_path`: (its edge ids, int64; the pairs kept), None on a cycle."""

def stack_walk(starts: Any, /) -> tuple[bytearray, bytearray]:
    """HTA's call stack walked depth-first: (walk, parent), int64 (critical_path.py)."""
