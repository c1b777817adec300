"""CPU seconds per stage of one `fleetscope trace analyze --format json` run, for this tree and an
earlier one side by side (issue 29: where a set's time goes, and what a change saved).

    .venv/bin/python -m bench.trace_stages --set /tmp/sets/59mb [--base /tmp/base] [--runs 5]

Each run is a fresh process (`time.process_time` around each stage, so the load of a shared box
counts less than in wall times): interpreter start, numpy's import, the trace modules' imports,
load and preparation, the registry, each analysis, findings and the JSON text. Trees alternate
run by run (`--base` is a copy of an earlier tree, e.g. `git archive` of the merge base with the
built extension copied in, put first on PYTHONPATH); the table holds each stage's least CPU over
the runs, the fairest figure on a shared machine, and their sum. The row "of which the C decode
pass" is the part of `load` spent in `_kineto_columns.decode_events` (not added to the sum): what
a second core could take over if that pass ran without the GIL (issue 29, seventeenth session).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_PART = "of which the C decode pass"  # inside `load`, not a stage of its own

# Runs in the child: prints one JSON object of stage -> CPU seconds.
_PROBE = """
import json, sys, time
start = time.process_time()
import numpy
after_numpy = time.process_time()
from analyzers.traces import load_fast
decode_cpu = [0.0]
def _timed_decode(*args, decode=load_fast._decode_columns):
    t = time.process_time()
    try:
        return decode(*args)
    finally:
        decode_cpu[0] += time.process_time() - t
load_fast._decode_columns = _timed_decode
from analyzers.traces.analyses import load_registry
from analyzers.traces.analyses.base import TraceOptions
from analyzers.traces.api import TraceReport, load_trace_set
from analyzers.traces.findings import trace_findings
from analyzers.traces.render import report_json
stages = {"start": start, "numpy": after_numpy - start}
def timed(name, fn):
    t = time.process_time()
    out = fn()
    stages[name] = time.process_time() - t
    return out
stages["imports"] = time.process_time() - after_numpy
trace = timed("load", lambda: load_trace_set(sys.argv[1], hta_compatible=sys.argv[2] == "hta"))
stages["of which the C decode pass"] = decode_cpu[0]
registry = timed("registry", load_registry)
options = TraceOptions()
results = {n: timed(n, lambda s=s: s.fn(trace, options)) for n, s in registry.items()}
found = timed("findings", lambda: trace_findings(trace, results, options))
timed("json", lambda: report_json([TraceReport(trace, results, found)]))
print(json.dumps(stages))
"""


def _run(tree: Path, trace_set: Path, mode: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(trace_set), mode],
        cwd=tree, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    stages: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return stages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", type=Path, required=True, help="trace file or folder of ranks")
    parser.add_argument("--base", type=Path, help="an earlier tree to compare with")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--mode", choices=("hta", "native"), default="hta")
    args = parser.parse_args(argv)
    trees = {"this": ROOT} | ({"base": args.base.resolve()} if args.base else {})
    best: dict[str, dict[str, float]] = {name: {} for name in trees}
    for _ in range(args.runs):
        for name, tree in trees.items():
            for stage, cpu in _run(tree, args.set, args.mode).items():
                best[name][stage] = min(cpu, best[name].get(stage, cpu))
    for name in trees:  # each stage at its least: a run's total would carry its load again
        best[name]["total (sum of the least)"] = sum(
            cpu for stage, cpu in best[name].items() if stage != _PART
        )
    stages = sorted(best["this"], key=lambda s: (s.startswith("total"), -best["this"][s]))
    stages.remove(_PART)
    stages.insert(stages.index("load") + 1, _PART)
    print(f"| stage | {' | '.join(f'{name} CPU s' for name in trees)} |")
    print(f"|---|{'---:|' * len(trees)}")
    for stage in stages:
        print(f"| {stage} | {' | '.join(f'{best[t].get(stage, 0.0):.3f}' for t in trees)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
