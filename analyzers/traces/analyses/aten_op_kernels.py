"""ATen op -> kernels: the kernel sequence each ATen op launches, how often, and how long the op
takes to reach its first launch and the launch to reach the GPU.

Algorithm (HTA 0.5.0 `get_aten_op_kernels_and_delay()`, `hta/analyzers/cuda_kernel_analysis.py`):
1. Launches: rows whose name matches `(cuda.*LaunchKernel)|(cuLaunchKernel)|(^runFunction)` at
   its start (HTA's KERNEL_LAUNCH_CATEGORY_PATTERN), in row order.
2. Each launch's op: of the rows named `aten::*` (any thread) that start at or before the launch
   and end at or after its end, the latest starting (the deepest); none: the launch is skipped.
   Its kernel: the GPU row linked to the launch (`index_correlation`).
3. Per op instance (thread, name, start): its kernels in launch order, joined by ` -> `, the
   delay from the op's start to its first launch (`aten_op_delay`) and from that launch to its
   kernel's start (`runtime_delay`).
4. Per (op name, kernel sequence): `occurrence_count`, `avg_aten_op_launch_delay`,
   `avg_runtime_delay` (us, rounded to 3 places), most frequent first.
HTA also raises where a launch has no kernel (skipped here).
"""

from __future__ import annotations

import re

import numpy as np

from analyzers.traces.analyses.base import RankRows, TraceOptions, analysis, rank_by_rank
from analyzers.traces.frame import F64, I64, RankFrame
from analyzers.traces.stats import hta_round, last_not_below

PLUGIN_ORDER = 177  # after the kernel sequences
_LAUNCH = re.compile(r"(cuda.*LaunchKernel)|(cuLaunchKernel)|(^runFunction)")
_ATEN = re.compile("aten::")
COLUMNS = (
    "rank",
    "aten_op_name",
    "kernel_sequence",
    "occurrence_count",
    "avg_aten_op_launch_delay",
    "avg_runtime_delay",
)


def enclosing_ops(op_ts: F64, op_end: F64, ts: F64, end: F64) -> I64:
    """For each [ts, end], the position (in `op_ts`, sorted by start) of the latest-starting op
    enclosing it, -1 if none (an op or interval with a NaN end encloses nothing)."""
    before = np.searchsorted(op_ts, ts, side="right")
    found = last_not_below(np.where(np.isnan(op_end), -np.inf, op_end), before, end)
    return np.where(np.isnan(end), -1, found)


def _first_ids(*keys: np.ndarray) -> np.ndarray:
    """Per row, the number of its distinct `keys` tuple (rows equal in every key share one)."""
    order = np.lexsort(keys[::-1])
    new = np.zeros(len(order), dtype=bool)  # where a distinct tuple begins, in sorted order
    new[0] = True
    for k in keys:
        sk = k[order]
        new[1:] |= sk[1:] != sk[:-1]
    ids = np.empty(len(order), dtype=np.int64)
    ids[order] = np.cumsum(new) - 1
    return ids


def op_kernel_rows(frame: RankFrame) -> list[tuple[str, str, int, float, float]]:
    """(op name, kernel sequence, count, mean op->launch delay, mean launch->kernel delay)."""
    ops = np.flatnonzero(frame.names_matching(_ATEN.match))
    ops = ops[np.argsort(frame.ts[ops], kind="stable")]
    gpu_of = np.full(len(frame), -1, dtype=np.int64)
    gpu = np.flatnonzero(frame.stream != -1)
    launcher = frame.linked_rows(gpu)
    gpu_of[launcher[launcher >= 0]] = gpu[launcher >= 0]
    linked = np.flatnonzero(frame.names_matching(_LAUNCH.match))
    linked = linked[gpu_of[linked] >= 0]
    at = enclosing_ops(frame.ts[ops], frame.end[ops], frame.ts[linked], frame.end[linked])
    launch = linked[at >= 0]
    op, kernel = ops[at[at >= 0]], gpu_of[launch]
    if not len(launch):
        return []
    names = frame.names
    # Per name code, one code of its text (frame.symbols): grouping by it groups by text even
    # where a name table holds a text twice.
    by_text = np.array([frame.symbols[n] for n in names], dtype=np.int64)
    ids = _first_ids(frame.tid[op], frame.name[op], frame.ts[op])
    _, first_at, inst = np.unique(ids, return_index=True, return_inverse=True)
    inst = np.argsort(np.argsort(first_at))[inst]
    order = np.argsort(inst, kind="stable")
    firsts = np.sort(first_at)  # each instance's first launch
    length = np.bincount(inst)  # inst numbers every instance
    kcode = by_text[frame.name[kernel]][order]
    begin = np.concatenate([[0], np.cumsum(length)[:-1]])
    # A sequence's number: distinct rows of its codes among the sequences of its length.
    seq = np.zeros(len(length), dtype=np.int64)
    texts: list[str] = []
    for size in np.unique(length).tolist():
        which = np.flatnonzero(length == size)
        table = kcode[begin[which, None] + np.arange(size)]
        rows, ids = np.unique(table, axis=0, return_inverse=True)
        seq[which] = len(texts) + ids.reshape(-1)
        texts += [" -> ".join(names[k] for k in r) for r in rows.tolist()]
    same_text: dict[str, int] = {}  # ' -> ' inside a name could join two lengths alike
    seq = np.array([same_text.setdefault(t, i) for i, t in enumerate(texts)], dtype=np.int64)[seq]
    op_name = by_text[frame.name[op[firsts]]]
    group = _first_ids(op_name, seq)
    a = (frame.ts[launch] - frame.ts[op])[firsts]
    b = (frame.ts[kernel] - frame.ts[launch])[firsts]
    members = np.argsort(group, kind="stable")  # each group's instances in instance order
    cut = np.flatnonzero(np.diff(group[members])) + 1
    out = []
    for m in np.split(members, cut):
        mean_a, mean_b = (hta_round(float(np.mean(x[m])), 3) for x in (a, b))
        out.append((names[int(op_name[m[0]])], texts[int(seq[m[0]])], len(m), mean_a, mean_b))
    out.sort(key=lambda r: (-r[2], r[0], r[1]))
    return out


@analysis(
    "aten_op_kernels",
    "ATen op kernels and launch delays",
    "get_aten_op_kernels_and_delay",
    "every rank (HTA: rank 0); HIP traces give a note (HTA raises)",
)
@rank_by_rank("aten_op_kernels_and_delay", COLUMNS)
def aten_op_kernels(frame: RankFrame, options: TraceOptions) -> RankRows:
    found = op_kernel_rows(frame)
    note = "" if found else "no kernel launched inside an ATen op"
    rows = [(frame.rank, *r) for r in found]
    return RankRows(rows, {"op_kernel_sequences": float(len(found))}, note)
