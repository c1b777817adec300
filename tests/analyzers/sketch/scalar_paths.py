"""Both scalar paths of `QuantileSketch.add(float)` side by side, for the specifications.

`analyzers.sketch.core` loads one scalar buffer for good at import: the C type where it was built, else
the pure-Python fallback. To run the same specifications on the fallback in the same process,
`python_path_module()` loads a second copy of analyzers/sketch/core.py exactly as it loads on a host
without the extension (its import refused), with its own `QuantileSketch` and `SlidingQuantiles`.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import analyzers.sketch.core as sketch_module

_COPY = "tests.analyzers.sketch.python_path_sketch"  # registered, so pickle finds its classes
_EXTENSION = "analyzers.sketch._sketch_scalar"


def python_path_module() -> ModuleType:
    """analyzers.sketch.core as loaded without the C extension (one copy per test session)."""
    if _COPY in sys.modules:
        return sys.modules[_COPY]
    spec = importlib.util.spec_from_file_location(_COPY, sketch_module.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    saved = sys.modules.get(_EXTENSION)
    sys.modules[_EXTENSION] = None  # type: ignore[assignment]  # "import it" now raises ImportError
    try:
        sys.modules[_COPY] = module
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[_COPY]
        raise
    finally:
        if saved is None:
            del sys.modules[_EXTENSION]
        else:
            sys.modules[_EXTENSION] = saved
    assert module.SCALAR_PATH == "python"
    return module
