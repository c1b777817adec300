"""Types of the C extension built from analyzers/traces/_kineto_columns.c (read that file's
comment); analyzers.traces needs it (pyproject.toml)."""

from typing import Any

def decode_events(
    text: Any, base: int, symbols: dict[object, int], /
) -> tuple[int, bool, bool, dict[str, bytearray]] | None:
    """Columns of one JSON array of Kineto events, or None where msgspec must decide."""

def longest_path(n: int, src: Any, dst: Any, weight: Any, /) -> tuple[bytearray, int] | None:
    """networkx's `dag_longest_path`: (its edge ids, int64; the pairs kept), None on a cycle."""

def stack_walk(starts: Any, /) -> tuple[bytearray, bytearray]:
    """HTA's call stack walked depth-first: (walk, parent), int64 (critical_path.py)."""
