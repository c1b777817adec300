"""Runs `fleetscope trace analyze` over many traces in one fresh process on one array engine, and
writes what each run printed (or raised) as JSON: the two engines' outputs are then compared.

    python -m tests.analyzers.traces.engine_runner numpy|lite CASES.json OUT.json

CASES.json: a list of argument lists for `fleetscope` (`["trace", "analyze", PATH, ...]`). Each
run goes through `app.cli.main(argv)`, which is not the whole process, so a lite run that cannot
answer exactly raises (engine.py) instead of re-running on numpy: that is recorded as `raised`.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys


def main() -> None:
    engine, cases_path, out_path = sys.argv[1:4]
    from analyzers.traces import xp

    xp.choose("lite" if engine == "lite" else "numpy")
    from app.cli import main as fleetscope

    with open(cases_path) as f:
        cases = json.load(f)
    outputs = []
    for argv in cases:
        out, err = io.StringIO(), io.StringIO()
        record: dict[str, object] = {"argv": argv}
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                record["code"] = fleetscope(argv)
        except Exception as exc:  # what the engine could not do; compared by the test
            record["raised"] = f"{type(exc).__name__}: {exc}"
            record["not_implemented"] = isinstance(exc, NotImplementedError)
        record["stdout"] = out.getvalue()
        record["stderr"] = err.getvalue()
        outputs.append(record)
    with open(out_path, "w") as f:
        json.dump(
            {"engine": xp.bound(), "numpy_loaded": "numpy" in sys.modules, "runs": outputs}, f
        )


if __name__ == "__main__":
    main()
