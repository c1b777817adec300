"""Trace analyses: one module per analysis, each registering itself in `base.REGISTRY`.

`ANALYSIS_MODULES` is the list of built-in modules, imported once by `load_registry()`; the
order is the order of the report. Adding an analysis means adding a module here, never an
if-chain elsewhere; another package adds its own through the entry-point group
`fleetscope.trace_analyses` (fleetscope.plugins), after the built-ins.
"""

from __future__ import annotations

import importlib

from analyzers.traces.analyses.base import REGISTRY, AnalysisSpec
from fleetscope import plugins

__all__ = ["ANALYSIS_MODULES", "load_registry"]

ANALYSIS_MODULES: tuple[str, ...] = (
    "temporal",
    "idle_time",
    "kernel_breakdown",
    "overlap",
    "launch_stats",
    "queue_length",
    "memory_bw",
    "user_annotation",
    "steps",
    "dataloader",
    "sync",
    "pageable_memcpy",
    "gpu_gaps",
    "low_util",
    "tensor_cores",
    "top_kernels",
    "whatif",
)


def load_registry() -> dict[str, AnalysisSpec]:
    """Every registered analysis by name, in report order."""
    for module in ANALYSIS_MODULES:
        importlib.import_module(f"{__name__}.{module}")
    for entry in plugins.registered(plugins.TRACE_ANALYSES).values():
        entry.load()  # a third party's module: its @analysis functions register on import
    # Report order is the module list's, whatever imported a module first (the what-if's replay
    # imports the step, sync and copy analyses); third parties' after the built-ins.
    rank = {f"{__name__}.{m}": n for n, m in enumerate(ANALYSIS_MODULES)}
    ordered = sorted(REGISTRY.items(), key=lambda item: rank.get(item[1].fn.__module__, len(rank)))
    return dict(ordered)
