"""numpy's import without its docstring modules, for the trace command's numpy engine (issue 19).

`import numpy` runs `numpy._core._add_newdocs` and `_add_newdocs_scalars`, which only attach
docstrings to numpy's C functions and scalar types (~5 ms of every `fleetscope trace analyze`,
whose whole run is timed against HTA's). A command that prints its report and exits never reads
them, so while it imports numpy those two modules are handed to `importlib.util.LazyLoader`:
registered, and executed only if anything ever reads an attribute of them (then they run as
usual). Nothing else about numpy changes; a numpy without these modules imports as before.
Only for a short command's own process (cli.py), never for a server, a notebook or a library
caller, which may call `help()` on numpy.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from importlib.machinery import ModuleSpec
from types import ModuleType

__all__ = ["DOCSTRING_MODULES", "docstrings_deferred", "numpy_as_a_command_imports_it"]

DOCSTRING_MODULES = frozenset({"numpy._core._add_newdocs", "numpy._core._add_newdocs_scalars"})


class _DeferDocstrings:
    """A meta path finder that finds the docstring modules as the other finders would, with a
    lazy loader; every other name it leaves to them."""

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name not in DOCSTRING_MODULES:
            return None
        from importlib.util import LazyLoader

        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec: ModuleSpec | None = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = LazyLoader(spec.loader)
                return spec
        return None


@contextmanager
def docstrings_deferred() -> Iterator[None]:
    """While in the block, numpy's docstring modules import lazily (module docstring)."""
    finder = _DeferDocstrings()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


@contextmanager
def numpy_as_a_command_imports_it(whole_process: bool) -> Iterator[None]:
    """Imports in the block bring numpy in as `fleetscope trace analyze` wants it (cli.py and the
    numpy standby, standby.py): with one OpenBLAS thread, and its docstring modules deferred
    where the command is the whole process.

    No analysis calls BLAS, yet numpy's import starts OpenBLAS's thread pool, one thread a core,
    which costs ~30 ms of CPU a run (issue 19); a user's own setting wins. OpenBLAS reads it when
    numpy is first imported, so it is unset again after, and processes the command starts get the
    user's environment."""
    blas_set = "OPENBLAS_NUM_THREADS" in os.environ
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        with docstrings_deferred() if whole_process else nullcontext():
            yield
    finally:
        if not blas_set:
            del os.environ["OPENBLAS_NUM_THREADS"]
