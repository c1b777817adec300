"""Every quantile-sketch specification here runs on both scalar paths of `add(float)`: the C
extension (`c`) and the pure-Python fallback (`python`), so a host without a compiler gets the
same sketch, tested (analyzers/sketch/scalar.py)."""

from __future__ import annotations

import pytest

import analyzers.sketch.core as sketch_module

from . import oracle
from .scalar_paths import python_path_module


@pytest.fixture(autouse=True, params=["c", "python"])
def scalar_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point the test module's and the oracle's sketch names at the path under test."""
    if request.param == "c":
        if sketch_module.SCALAR_PATH != "c":
            pytest.skip("the C extension analyzers/sketch/_sketch_scalar.c is not built here")
        return "c"
    module = python_path_module()
    for target in (request.module, oracle):
        for name in ("QuantileSketch", "SlidingQuantiles"):
            if hasattr(target, name):
                monkeypatch.setattr(target, name, getattr(module, name))
        if hasattr(target, "sketch_module"):
            monkeypatch.setattr(target, "sketch_module", module)
    return "python"
