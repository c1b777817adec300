"""The array module the trace engine computes with: numpy, or `listnp` for a small trace (issue 19).

Why: `fleetscope trace analyze` is measured as a whole command against HTA's, and on a trace of
a few hundred events importing numpy (75-110 ms) costs more than everything else together, HTA's
10x budget included. `listnp` gives numpy's exact results for the part of numpy the engine uses,
on Python lists, and imports in about a millisecond; it is slower per element, so only small
traces take it (`analyzers/traces/engine.py` decides, and falls back to numpy on anything
`listnp` cannot reproduce exactly).

Every module of the engine takes `np` from here (`from analyzers.traces.xp import np`), so one
code base runs on either. The module is bound on the first such import, once per process:
`choose("lite")` before it, or `FLEETSCOPE_TRACE_ENGINE=lite` in the environment, binds listnp;
anything else binds numpy (every server, dashboard and test process). Type checkers always see
numpy. Never chooses by itself and never switches once bound.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import numpy as np

__all__ = ["ENV", "Engine", "bound", "choose", "np", "preference"]

ENV = "FLEETSCOPE_TRACE_ENGINE"
Engine = Literal["numpy", "lite"]
_chosen: Engine | None = None


def choose(engine: Engine) -> None:
    """Bind `engine` at the engine's first import; refused once another engine is bound."""
    global _chosen
    current = bound()
    if current is not None and current != engine:
        raise RuntimeError(f"the trace engine already computes with {current}, not {engine}")
    _chosen = engine


def bound() -> Engine | None:
    """The engine `np` is bound to, or None before the engine's first import."""
    module = globals().get("np")
    if module is None:
        return None
    return "lite" if module.__name__.endswith("listnp") else "numpy"


def preference() -> Engine | None:
    """The engine `np` is bound to, else the one `choose` or FLEETSCOPE_TRACE_ENGINE asks for;
    None when the caller is free to pick (engine.engine_for)."""
    current = bound()
    if current is not None:
        return current
    if _chosen is not None:
        return _chosen
    forced = os.environ.get(ENV, "").strip().lower()
    return "lite" if forced == "lite" else "numpy" if forced == "numpy" else None


def __getattr__(name: str) -> object:
    if name != "np":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    module = importlib.import_module(
        "analyzers.traces.listnp" if preference() == "lite" else "numpy"
    )
    globals()["np"] = module
    return module
