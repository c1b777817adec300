"""Which array module a `fleetscope trace analyze` run computes with, and how the small-trace
engine stays exactly numpy's (issue 19).

A trace of up to `LITE_MAX_TEXT_BYTES` of JSON runs on `listnp` (xp.py says why); a larger one,
or a process that already imported numpy, on numpy. The lite run must print byte for byte what
the numpy run prints, so it gives up rather than guess: anything listnp cannot reproduce exactly
raises (NotImplementedError, or any other error: a corrupt file's message comes from the numpy
run too), and the command runs again on numpy (`cli._analyze`: the process re-executes itself).

The one thing numpy leaves open is the order of equal keys in its default (unstable) sort, which
HTA's `sort_values` uses and which can change HTA's numbers (an idle gap measured from one of two
kernels that start together). numpy's order comes from SIMD sorting networks that differ by CPU,
so listnp cannot know it; `each_tie_order` instead runs the analysis under every order the ties
allow, and keeps the result only when all of them agree: then it is numpy's result whatever order
numpy picks. When they disagree, or there are too many orders to try, the numpy run decides.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from analyzers.traces.xp import Engine

__all__ = [
    "LITE_MAX_TEXT_BYTES",
    "MAX_TIE_RUNS",
    "TieOrderMatters",
    "each_tie_order",
    "engine_for",
    "text_bytes",
]

# The largest trace (JSON text, all files together) the lite engine takes. Measured with
# bench.trace_engines (bench/RESULTS.md, "Trace analysis engines"): on windows of real traces the
# lite command was still faster than the numpy one at ~1 MiB (4,000 events: 98-129 ms against
# 133-165), by less as windows grow; a window it cannot answer costs the numpy run plus ~15 ms
# where the numpy standby runs (standby.py). Above this, fewer traces would gain and more lose.
LITE_MAX_TEXT_BYTES = 1 << 20
# Runs of one analysis under different orders of tied keys before the numpy run decides instead.
MAX_TIE_RUNS = 64
_TRACE_SUFFIXES = (".json", ".gz")  # api.TRACE_SUFFIXES (api imports the engine)
_GZIP_MAGIC = b"\x1f\x8b"

T = TypeVar("T")


class TieOrderMatters(NotImplementedError):
    """The analysis's result depends on the order numpy gives equal keys: only numpy can say."""


def engine_for(paths: Sequence[str | Path]) -> Engine:
    """lite for a small trace while numpy is not loaded yet (a process that paid its import, a
    server or a test, gains nothing from listnp), else numpy. Only for a process that is the
    whole command: it can re-run itself on numpy when listnp cannot answer (cli._analyze_lite)."""
    import sys

    if "numpy" in sys.modules:
        return "numpy"
    total = text_bytes(paths)
    return "lite" if total is not None and total <= LITE_MAX_TEXT_BYTES else "numpy"


def text_bytes(paths: Sequence[str | Path]) -> int | None:
    """The JSON text the trace files under `paths` hold, from each gzip file's own trailer (its
    size mod 2**32, exact below 4 GiB; a file over 4 GiB compressed is never small); None when a
    path cannot be read, so the numpy run reports what is wrong."""
    total = 0
    for path in map(Path, paths):
        try:
            if path.is_dir():
                files = [
                    p for p in path.iterdir() if p.is_file() and p.name.endswith(_TRACE_SUFFIXES)
                ]
            else:
                files = [path]
            for file in files:
                total += _file_text_bytes(file)
        except OSError:
            return None
    return total


def _file_text_bytes(file: Path) -> int:
    with open(file, "rb") as f:
        if f.read(2) != _GZIP_MAGIC:
            return os.fstat(f.fileno()).st_size
        size = os.fstat(f.fileno()).st_size
        if size > 1 << 32:
            return 1 << 62
        f.seek(-4, os.SEEK_END)
        # ISIZE holds only the last member's size: a multi-member file (rare) counts its
        # compressed size ten times over, enough to send a big one to numpy.
        return max(int.from_bytes(f.read(4), "little"), 10 * size)


def each_tie_order(run: Callable[[], T]) -> T:
    """`run()`'s result, the same under every order of equal keys its unstable sorts could take
    (module docstring); raises TieOrderMatters when two orders give different results or when
    more than MAX_TIE_RUNS orders would have to be tried. Without ties, `run` runs once."""
    from analyzers.traces import listnp

    oracle = _TieOracle()
    with _hooked(listnp, oracle):
        oracle.begin()
        first = run()
        expected = repr(first)
        runs = 1
        while oracle.advance():
            if runs >= MAX_TIE_RUNS:
                raise TieOrderMatters(f"more than {MAX_TIE_RUNS} orders of equal sort keys")
            oracle.begin()
            if repr(run()) != expected:
                raise TieOrderMatters("the result depends on the order of equal sort keys")
            runs += 1
    return first


@contextlib.contextmanager
def _hooked(listnp: object, oracle: _TieOracle) -> Iterator[None]:
    saved = listnp.tie_order  # type: ignore[attr-defined]
    listnp.tie_order = oracle.order  # type: ignore[attr-defined]
    try:
        yield
    finally:
        listnp.tie_order = saved  # type: ignore[attr-defined]


class _TieOracle:
    """Walks every combination of tie orders, one run at a time, depth first: the k-th tied sort
    of a run takes choice `path[k]` (0 past the end of the path), an index into the orders of its
    tie groups; `advance` moves to the next combination like an odometer, last sort first."""

    def __init__(self) -> None:
        self.path: list[int] = []
        self.sizes: list[int] = []  # the number of orders of each tied sort of this run
        self.calls = 0

    def begin(self) -> None:
        self.calls = 0
        self.sizes = []

    def order(self, stable_order: list[int], tie_groups: list[tuple[int, int]]) -> list[int]:
        lengths = [end - start for start, end in tie_groups]
        count = 1
        for n in lengths:
            count *= math.factorial(n)
            if count > MAX_TIE_RUNS:
                raise TieOrderMatters(f"more than {MAX_TIE_RUNS} orders of equal sort keys")
        k = self.calls
        self.calls += 1
        self.sizes.append(count)
        if k >= len(self.path):
            self.path.append(0)
        choice = self.path[k]
        order = list(stable_order)
        for (start, end), n in zip(tie_groups, lengths, strict=True):
            choice, index = divmod(choice, math.factorial(n))
            order[start:end] = _nth_permutation(stable_order[start:end], index)
        return order

    def advance(self) -> bool:
        del self.path[self.calls :]  # choices of sorts this run did not reach
        while self.path:
            k = len(self.path) - 1
            if self.path[k] + 1 < self.sizes[k]:
                self.path[k] += 1
                return True
            self.path.pop()
        return False


def _nth_permutation(items: list[int], index: int) -> list[int]:
    """The `index`-th permutation of `items` in lexicographic order of positions."""
    pool = list(items)
    out = []
    for n in range(len(pool), 0, -1):
        pick, index = divmod(index, math.factorial(n - 1))
        out.append(pool.pop(pick))
    return out
