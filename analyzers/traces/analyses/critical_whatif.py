"""The critical path's bound on a what-if scenario: shortening work off the critical path saves
nothing, and work on it saves at most its own time.

Why it holds: any path through the dependency graph is a lower bound on the step, so after a
change the critical path P alone still takes `length(P) - reduction(P)`, where `reduction(P)` is
the time the change takes out of P's own edges; the step can fall by at most that (a scenario that
stretches P's work, like the workers' contention, makes it negative). The reduction per path
edge under a replay `Change` (replay.py):

- CPU time (an operator edge of a CPU event, or a launch edge's CPU part): its interval measured on
  the change's warped, scaled CPU clock;
- a GPU op: `dur * (1 - gpu_factor)` of that op;
- a launch or kernel-kernel gap under a latency cap (CUDA graphs): what exceeds the cap;
- dependency and sync edges carry no time.

Two changes have no bound here: syncs costing only their overhead (removing the sync removes
the path's own GPU -> CPU edges) and pinned copies (the copy's CPU call shrinks with the copy);
for those the replay's estimate stands alone.
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
    clock_span = replay.cpu_clock(change, path.end_us) - replay.cpu_clock(change, path.begin_us)
    cpu_cut = (path.end_us - path.begin_us) - clock_span
    reduction = np.where((path.kinds == OPERATOR) & on_cpu, cpu_cut, 0.0)
    if change.gpu_factor is not None:
        factor = np.ones(len(frame))
        factor[replay.gpu] = change.gpu_factor
        gpu = (path.kinds == OPERATOR) & ~on_cpu & (path.rows >= 0)
        reduction += np.where(gpu, w * (1.0 - factor[rows]), 0.0)
    launch = path.kinds == LAUNCH
    reduction += np.where(launch, cpu_cut, 0.0)
    if change.latency_cap_us != math.inf:
        over = np.maximum(0.0, w - change.latency_cap_us)
        gaps = launch | (path.kinds == KERNEL_KERNEL)
        reduction = np.where(gaps, np.maximum(reduction, over), reduction)
    return float(reduction.sum()) / replay.n_steps
