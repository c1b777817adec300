"""Peak memory of a command and every process it starts, together: the sum of their PSS
(proportional set size: a page shared by n processes counts 1/n to each), sampled every 20 ms.

    .venv/bin/python -m bench.tree_memory -- fleetscope trace analyze SET --format json

Why: GNU time's peak (`%M`) is the largest single process's, so a command that reads ranks in
worker processes, or forks workers over its pages, reads lower there than the memory it holds
(issue 29's rank workers). Linux only (/proc/PID/smaps_rollup). Prints wall s and peak MiB.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import time
from pathlib import Path


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def tree_pss_kib(root: int) -> int:
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        total += next(
            int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")
        )
        todo += _children(pid)
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="+")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    child = subprocess.Popen(args.command, stdout=subprocess.DEVNULL)
    peak = 0
    while child.poll() is None:
        peak = max(peak, tree_pss_kib(child.pid))
        time.sleep(0.02)
    print(
        f"wall {time.perf_counter() - t0:.1f} s, tree PSS peak {peak / 1024:.0f} MiB, rc {child.returncode}"
    )
    return child.returncode


if __name__ == "__main__":
    raise SystemExit(main())
