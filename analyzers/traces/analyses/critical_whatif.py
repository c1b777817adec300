"""The critical path's bound on a what-if scenario: shortening work off the critical path saves
nothing, and work on it saves at most its own time.

Why it holds: any path through the dependency graph is a lower bound on the step, so after a
change the critical path P alone still takes `length(P) - reduction(P)`, where `reduction(P)` is
the time the change takes out of P's own edges; the step can fall by at most that (a scenario that
stretches P's work, like the workers' contention, makes it negative). The reduction per path
edge under a replay `Change` (replay.py): a GPU op's `dur * (1 - gpu_factor)`; a launch or
kernel-kernel gap under a latency cap (CUDA graphs), what exceeds the cap; nothing on CPU,
dependency and sync edges.

No bound, the replay's estimate alone, for: syncs costing only their overhead (removing the sync
removes the path's own GPU -> CPU edges), pinned copies (the copy's CPU call shrinks with the
copy), and any change that alters a path edge's span on the CPU clock (DataLoader workers; per
edge on the warped clock, their cut priced a real data-loader stall's fix above the measured step).
"""

from __future__ import annotations

import math

import numpy as np

from analyzers.traces.analyses.critical_path import CriticalPath
from analyzers.traces.analyses.critical_path_graph import KERNEL_KERNEL, LAUNCH, OPERATOR
from analyzers.traces.analyses.replay import Change, Replay

__all__ = ["saving_bound_us"]


def saving_bound_us(path: CriticalPath, replay: Replay, change: Change) -> float:
    """The most `change` can save per step, by the critical path; +inf when it has no bound."""
    if change.sync_costs_overhead or change.pinned or replay.n_steps == 0:
        return math.inf
    frame = replay.frame
    rows = np.maximum(path.rows, 0)
    on_cpu = (path.rows >= 0) & (frame.stream[rows] == -1)
    w = path.weights
    _, longest, every = replay.derived(("path times", id(path)), lambda: _path_times(path))
    if not (_spans_kept(replay, change, longest) and _spans_kept(replay, change, every)):
        return math.inf  # a CPU warp: no per-edge bound (module docstring)
    reduction = np.zeros(len(path.kinds))
    if change.gpu_factor is not None:
        slot = replay.derived("gpu_slot", lambda: _gpu_slot(replay))[rows]
        factor = np.where(slot >= 0, change.gpu_factor[np.maximum(slot, 0)], 1.0)
        gpu = (path.kinds == OPERATOR) & ~on_cpu & (path.rows >= 0)
        reduction += np.where(gpu, w * (1.0 - factor), 0.0)
    if change.latency_cap_us != math.inf:
        over = np.maximum(0.0, w - change.latency_cap_us)
        gaps = (path.kinds == LAUNCH) | (path.kinds == KERNEL_KERNEL)
        reduction = np.where(gaps, np.maximum(reduction, over), reduction)
    return float(reduction.sum()) / replay.n_steps


def _spans_kept(replay: Replay, change: Change, times: np.ndarray) -> bool:
    """Whether every edge (`times`: their begins, then their ends) spans as long on the change's
    CPU clock as on the trace's, to float rounding."""
    clock = replay.cpu_clock(change, times)
    n = len(times) // 2
    return bool(np.allclose(clock[n:] - clock[:n], times[n:] - times[:n], rtol=1e-12, atol=1e-6))


def _path_times(path: CriticalPath) -> tuple[CriticalPath, np.ndarray, np.ndarray]:
    """The path's longest edge, and every edge, as `_spans_kept` reads them (begins, then ends).
    The longest edge is tried first: a change that warps the CPU clock most often stretches it,
    so one edge settles most changes. Holds the path, so its id is not reused while kept."""
    i = int(np.argmax(path.end_us - path.begin_us)) if len(path.end_us) else 0
    longest = np.concatenate([path.begin_us[i : i + 1], path.end_us[i : i + 1]])
    return path, longest, np.concatenate([path.begin_us, path.end_us])


def _gpu_slot(replay: Replay) -> np.ndarray:
    """Per frame row, its place in `replay.gpu` (-1: not replayed; a row listed twice keeps its
    last place), once per rank."""
    slot = np.full(len(replay.frame), -1, dtype=np.int64)
    slot[replay.gpu] = np.arange(len(replay.gpu))
    return slot
