"""`fleetscope --help` start-up time against a bare interpreter, in the same run.

Each run is a fresh process (`python -m app.cli --help`, what the `fleetscope` script runs); the
peer is the same interpreter doing nothing (`python -c pass`), so the difference is what the
command line itself costs. Wall time and CPU time (user + system of the child, from
`resource.getrusage`) are reported as medians over the runs, with the machine's load average, so
a figure taken on a busy machine reads as one.

    .venv/bin/python -m bench.cli              # 40 runs of each
    .venv/bin/python -m bench.cli --quick      # 10 runs of each
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

HELP = [sys.executable, "-m", "app.cli", "--help"]
BARE = [sys.executable, "-c", "pass"]
PROBE = (
    "import sys\nfrom app.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
    "print(sum(m.split('.')[0] in ('numpy', 'msgspec', 'pyarrow') for m in sys.modules))"
)


def timed(command: list[str]) -> tuple[float, float]:
    """(wall s, CPU s) of one run of `command`, its output discarded."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench.cli")
    parser.add_argument("--quick", action="store_true")
    runs = 10 if parser.parse_args(argv).quick else 40
    heavy = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
    ).stdout.split()[-1]
    print(f"load average before: {os.getloadavg()[0]:.2f}; heavy modules loaded by --help: {heavy}")
    for name, command in (("fleetscope --help", HELP), ("python -c pass (peer)", BARE)):
        timed(command)  # warm the page cache and the bytecode caches
        walls, cpus = zip(*(timed(command) for _ in range(runs)), strict=True)
        print(
            f"{name:<24} wall median {statistics.median(walls) * 1e3:6.1f} ms "
            f"(min {min(walls) * 1e3:5.1f}), CPU median {statistics.median(cpus) * 1e3:6.1f} ms"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
