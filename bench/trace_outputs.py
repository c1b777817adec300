"""Before/after check of `fleetscope trace analyze` outputs (issue 29): every trace folder under
tests/data/traces (and its edge cases), both modes, table and JSON; stdout, stderr and exit code
written one file per run, so that two trees' outputs can be diffed byte for byte.

    .venv/bin/python -m bench.trace_outputs --out /tmp/outs/after
    .venv/bin/python -m bench.trace_outputs --tree /tmp/base --out /tmp/outs/before
    diff -r /tmp/outs/before /tmp/outs/after

`--tree` is an earlier tree (e.g. `git archive` of main with the built extensions copied in); each
command runs with that tree as its working directory and first on PYTHONPATH. Setting
PYTHONPATH alone is not enough: `python -m` puts the working directory ahead of it, so run from
this checkout it would compare this checkout with itself.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = Path("tests") / "data" / "traces"  # relative: two trees print the same paths
_MODES = {"native": [], "hta": ["--hta-compatible"]}
_FORMATS = {"table": [], "json": ["--format", "json"]}


def trace_folders(root: Path = DATA) -> list[Path]:
    """Every folder under `root` that holds trace files itself."""
    return sorted(
        {p.parent for p in root.rglob("*") if p.name.endswith((".json", ".gz"))}
        - {p.parent for p in root.rglob("hta-0.5.0/*")}
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tree", type=Path, default=ROOT, help="the tree whose outputs to write")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    tree = args.tree.resolve()
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")])
    )
    command = [sys.executable, "-m", "app.cli", "trace", "analyze"]
    for folder in trace_folders(tree / DATA):
        for mode, mode_args in _MODES.items():
            for fmt, fmt_args in _FORMATS.items():
                done = subprocess.run(
                    [*command, str(folder.relative_to(tree)), *mode_args, *fmt_args],
                    capture_output=True,
                    cwd=tree,
                    env=env,
                    timeout=600,
                )
                stem = (
                    f"{folder.relative_to(tree / DATA).as_posix().replace('/', '__')}.{mode}.{fmt}"
                )
                (args.out / f"{stem}.out").write_bytes(done.stdout)
                (args.out / f"{stem}.err").write_bytes(done.stderr)
                (args.out / f"{stem}.rc").write_text(f"{done.returncode}\n")
                print(stem, done.returncode, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
