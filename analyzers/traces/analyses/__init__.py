"""Trace analyses: one module per analysis, each registering itself in `base.REGISTRY`.

The built-in modules are entry points of `fleetscope.trace_analyses` (pyproject.toml), as another
package's are (fleetscope.plugins). The report order is each module's `PLUGIN_ORDER` (lower
first), then the entry-point name. Adding an analysis is a module plus one entry-point line.
"""

from __future__ import annotations

from analyzers.traces.analyses.base import REGISTRY, AnalysisSpec
from fleetscope import plugins


def load_registry() -> dict[str, AnalysisSpec]:
    """Every registered analysis by name, in report order."""
    modules = plugins.load_group(plugins.TRACE_ANALYSES)
    # Whatever imported a module first (the what-if's replay imports the step, sync and copy
    # analyses), the report follows the plug-in order of the modules the functions live in.
    rank = {module.__name__: n for n, (_, module) in enumerate(modules)}
    ordered = sorted(REGISTRY.items(), key=lambda item: rank.get(item[1].fn.__module__, len(rank)))
    return dict(ordered)
