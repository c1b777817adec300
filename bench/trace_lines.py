"""What the speed-ups removed for issue 29's line count cost (wave 10): this tree beside a
`--before` tree (a `git archive` of the merge base, with its C extension copied in), alternating.

    .venv/bin/python -m bench.trace_lines --before /tmp/base [--reps N]

Each figure is CPU seconds (`time.process_time`, or the child's rusage for a whole process) from
a fresh process whose working directory is the tree, so its packages come first:
- `import`: `python -c "import analyzers.traces.cli"` (what registering `fleetscope trace` imports),
  `import analyzers.traces.api` (what a package re-exporting it would add there), and
  `python -m app.cli --help`;
- `command`: `fleetscope trace analyze DIR --format json` on trace_diff_control (native: the kernel
  classes and the what-if's AMP kinds) and on resnet50_nw0 (HTA mode: the rank search);
- stages inside one process, min of `--reps` runs: fleetscope's kernel classifier over every GPU
  name of trace_diff_control, the AMP kernel kind over the same names, and the chunked read of
  resnet50_nw0's file (gunzip, UTF-8 check, HTA's rank search) to its end.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

DATA = Path("tests") / "data" / "traces"
DIFF = DATA / "hta_trace_diff_control_rank3"
RESNET = DATA / "kineto_resnet50_nw0"
_STAGES = """
import json, sys, time
from analyzers.traces.api import load_trace_set
from analyzers.traces.classify import classify_fleetscope
from analyzers.traces.analyses.whatif import _kernel_kind
from analyzers.traces.trace_text import TextSource
reps, diff, resnet = int(sys.argv[1]), sys.argv[2], sys.argv[3]
frame = next(iter(load_trace_set(diff).frames()))
names = [frame.names[c] for c in sorted(set(frame.name[frame.on_stream].tolist()))]
file = sorted(__import__("pathlib").Path(resnet).glob("*.gz"))[0]
def read():
    source = TextSource(file, 1 << 20)
    while source.read():
        pass
    source.close()
def best(fn):
    times = []
    for _ in range(reps):
        t = time.process_time(); fn(); times.append(time.process_time() - t)
    return min(times)
print(json.dumps({
    "gpu_names": len(names),
    "classify_s": best(lambda: [classify_fleetscope(n) for n in names]),
    "amp_kind_s": best(lambda: [_kernel_kind(n) for n in names]),
    "read_resnet_s": best(read),
}))
"""


def _child_cpu(argv: list[str], cwd: Path) -> float:
    """CPU seconds (user + system) of one child process run to its end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, cwd=cwd, check=True, capture_output=True, env=os.environ)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _commands(here: Path) -> dict[str, list[str]]:
    py = sys.executable
    analyze = [py, "-m", "app.cli", "trace", "analyze"]
    return {
        "import analyzers.traces.cli": [py, "-c", "import analyzers.traces.cli"],
        # what a package re-exporting the API eagerly would make every `fleetscope trace` import
        "import analyzers.traces.api": [py, "-c", "import analyzers.traces.api"],
        "fleetscope --help": [py, "-m", "app.cli", "--help"],
        "trace analyze diff_control (native)": [*analyze, str(DIFF), "--format", "json"],
        "trace analyze resnet50_nw0 (hta)": [*analyze, str(RESNET), "--hta-compatible"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args(argv)
    here = Path.cwd()
    trees = {"before": args.before.resolve(), "after": here}
    cpu: dict[str, dict[str, list[float]]] = {}
    for _ in range(args.reps):
        for label, argv_ in _commands(here).items():
            for side, tree in trees.items():  # alternating, so the load hits both alike
                cpu.setdefault(label, {}).setdefault(side, []).append(_child_cpu(argv_, tree))
    stages = {}
    for side, tree in trees.items():
        out = subprocess.run(
            [sys.executable, "-c", _STAGES, str(args.reps * 3), str(DIFF.resolve()),
             str(RESNET.resolve())],
            cwd=tree, check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        stages[side] = json.loads(out)
    print(f"load {os.getloadavg()[0]:.1f}; median CPU s of {args.reps} fresh processes")
    for label, sides in cpu.items():
        medians = {s: statistics.median(v) for s, v in sides.items()}
        print(f"{label}: before {medians['before']:.3f}  after {medians['after']:.3f}")
    print("stages, min CPU s:", json.dumps(stages))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
