"""Trace diff: which ops and kernels two traces (before/after a change, or two ranks) run, how
often and for how long, and what was added, removed, or changed.

Algorithm (HTA 0.5.0 `TraceDiff.compare_traces` and `ops_diff`, `hta/trace_diff.py`, with its
defaults: first rank, first iteration, CPU and GPU):
1. Iteration of each row (`hta/common/trace.py` `add_iteration`): a CPU row (`stream < 0`)
   belongs to the last row named `ProfilerStep#N` (in file order; the `gpu_user_annotation`
   copies count) with `ts <= row.ts < ts + dur`; a GPU row (`stream > 0`) to its launching row's
   iteration (`index_correlation`); anything else to -1.
2. A side's rows: its rank's rows of the chosen iteration (default: the smallest ProfilerStep
   number among the trace's names), all rows, or only CPU (`stream == -1`) or GPU rows.
3. Per name: `counts` (rows) and `total_duration` (sum of `dur`, us); outer join of the two
   sides on the name (a missing side is 0); `diff_counts = test - control`, `diff_duration` the
   same; `counts_change_categories` is `+`, `-` or `=`.
4. `ops_diff`: the names of each of HTA's five kinds of change (`CHANGES`).
Beyond HTA: `iteration="all"` compares the whole traces, and the table is sorted by the size of
the change.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal

import numpy as np

from analyzers.traces.analyses.base import Table
from analyzers.traces.frame import RankFrame, TraceSet
from fleetscope.errors import TraceError

COLUMNS = (
    "name",
    "control_counts",
    "control_total_duration",
    "test_counts",
    "test_total_duration",
    "diff_counts",
    "diff_duration",
    "counts_change_categories",
)
# On a name's (control count, test count, their difference).
CHANGES: dict[str, Callable[[int, int, int], bool]] = {
    "added": lambda ca, cb, diff: ca == 0 and cb > 0,
    "deleted": lambda ca, cb, diff: ca > 0 and cb == 0,
    "increased": lambda ca, cb, diff: ca > 0 and diff > 0,
    "decreased": lambda ca, cb, diff: cb > 0 and diff < 0,
    "unchanged": lambda ca, cb, diff: cb > 0 and diff == 0,
}
Device = Literal["all", "cpu", "gpu"]
_STEP = re.compile(r"ProfilerStep\s*#\s*(\d+)")


def step_number(name: str) -> int:
    """N of a `ProfilerStep#N` name (HTA's pattern), -1 for any other name."""
    match = _STEP.match(name) if name.startswith("ProfilerStep") else None
    return int(match.group(1)) if match else -1


def row_iterations(frame: RankFrame) -> np.ndarray:
    """Each row's iteration, -1 when none (step 1 of the module docstring)."""
    out = np.full(len(frame), -1, dtype=np.int64)
    # Each symbol's step number, then -1 for a row without a name (symbol -1).
    number_of = np.array([*map(step_number, frame.names), -1], dtype=np.int64)
    steps = np.flatnonzero(number_of[frame.name] >= 0)
    cpu = frame.stream < 0
    for row in steps[np.argsort(frame.index[steps], kind="stable")].tolist():
        start, end = frame.ts[row], frame.ts[row] + frame.dur[row]
        out[cpu & (frame.ts >= start) & (frame.ts < end)] = number_of[frame.name[row]]
    gpu = np.flatnonzero(frame.stream > 0)
    # A link of 0 is HTA's "correlated, no partner", not event 0.
    launcher = np.where(frame.index_correlation[gpu] > 0, frame.linked_rows(gpu), -1)
    out[gpu] = np.where(launcher >= 0, out[np.maximum(launcher, 0)], -1)
    return out


def _side(
    trace: TraceSet, rank: int | None, iteration: int | Literal["all"] | None, device: Device
) -> dict[str, tuple[int, float]]:
    ranks = sorted(trace.ranks)
    rank = ranks[0] if rank is None else rank
    if rank not in trace.ranks:
        raise TraceError(f"{trace.source}: no rank {rank} (ranks: {ranks})")
    frame = trace.ranks[rank]
    keep = np.ones(len(frame), dtype=bool)
    if iteration != "all":
        if iteration is None:  # HTA's default: the smallest ProfilerStep number of the names
            numbers = [n for n in map(step_number, frame.names) if n >= 0]
            if not numbers:
                raise TraceError(
                    f"{trace.source}: no ProfilerStep iterations to compare "
                    "(compare the whole traces with --iteration all)"
                )
            iteration = min(numbers)
        iterations = row_iterations(frame)
        if not (iterations == iteration).any():
            found = sorted(set(iterations.tolist()) - {-1})
            raise TraceError(f"{trace.source}: no iteration {iteration} (iterations: {found})")
        keep &= iterations == iteration
    keep &= {"all": True, "cpu": frame.stream == -1, "gpu": frame.stream != -1}[device]
    rows = np.flatnonzero(keep)
    size = len(frame.names) or 1
    counts = np.bincount(frame.name[rows], minlength=size)
    totals = np.bincount(frame.name[rows], weights=frame.dur[rows], minlength=size)
    out: dict[str, tuple[int, float]] = {}
    for code in np.flatnonzero(counts).tolist():
        name = frame.names[code]
        c, t = out.get(name, (0, 0.0))  # two symbols may spell one name: group by the text
        out[name] = (c + int(counts[code]), t + float(totals[code]))
    return out


def compare_traces(
    control: TraceSet,
    test: TraceSet,
    *,
    control_rank: int | None = None,
    test_rank: int | None = None,
    control_iteration: int | Literal["all"] | None = None,
    test_iteration: int | Literal["all"] | None = None,
    device: Device = "all",
) -> Table:
    """One row per op or kernel name in either trace, largest duration change first."""
    a = _side(control, control_rank, control_iteration, device)
    b = _side(test, test_rank, test_iteration, device)
    rows = []
    for name in sorted(a.keys() | b.keys()):
        ca, ta = a.get(name, (0, 0.0))
        cb, tb = b.get(name, (0, 0.0))
        sign = "+" if cb > ca else "-" if cb < ca else "="
        rows.append((name, ca, ta, cb, tb, cb - ca, tb - ta, sign))
    rows.sort(key=lambda r: (-abs(r[6]), -abs(r[5]), r[0]))
    return Table("trace_diff", COLUMNS, tuple(rows))


def ops_diff(table: Table) -> dict[str, list[str]]:
    """HTA's five kinds of change (step 4), each a sorted list of names."""
    return {
        kind: sorted(name for name, ca, _, cb, _, diff, _, _ in table.rows if holds(ca, cb, diff))
        for kind, holds in CHANGES.items()
    }
