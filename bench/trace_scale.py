"""Multi-rank trace sets at growing size: fleetscope's command beside HTA 0.5.0's, wall time and
peak memory (issue 29: "at any size, in bounded memory").

    .venv/bin/python -m bench.trace_scale --sizes 59,200 [--work /tmp/trace-sets] [--timeout 1800]
        [--compare nine,whole] [--reps N]

Each size is an 8-rank set built by `bench.trace_sets` from a real shared trace (iterations
repeated, timestamps and ids shifted) in --work. Both sides run as a fresh process, one after
the other: ours `fleetscope trace analyze --hta-compatible SET --format json` (output to a
pipe, discarded), HTA `bench/hta_runner.py SET` in its own venv (bench.traces.ensure_hta_venv).
Each side gives the same answers as the other (`--compare`):
- `nine`: HTA's nine calls of its CSV references, and ours with `--analyses` their eight
  registry analyses (queue_length answers two calls);
- `whole`: ours the whole command (every analysis, 14 of them HTA's, and the rules), HTA every
  call of its API that those 14 reproduce (`hta_runner.py --api all`), so ours does the more work.
Peak memory is the child's peak RSS, by GNU time where installed (`_run` says why; HTA's
parse workers, if any, are children of it and counted where the OS folds them in). A side that runs past
--timeout is recorded as not done. This checkout is byte-compiled first (`compileall`), as an
installed copy and HTA's venv are (bench.trace_command.compile_bytecode says why).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.trace_command import compile_bytecode
from bench.trace_sets import DEFAULT_BASE, build_set
from bench.traces import ensure_hta_venv

ROOT = Path(__file__).resolve().parents[1]
# The registry analyses that answer HTA's nine calls (hta_runner._analyses' first nine).
NINE = ("temporal_breakdown", "idle_time", "kernel_breakdown", "comm_comp_overlap", "launch_stats",
        "queue_length", "memory_bw", "user_annotation")  # fmt: skip
COMPARISONS = {  # name: (ours' extra arguments, the runner's)
    "nine": (["--analyses", ",".join(NINE)], ["--api", "nine"]),
    "whole": ([], ["--api", "all"]),
}


def _run(cmd: list[str], timeout_s: float, keep_stdout: bool = False) -> dict[str, Any]:
    """Wall seconds and peak RSS (MiB) of one child; `done` False when it timed out; with
    `keep_stdout`, its output (HTA's runner prints one JSON line; ours is discarded unread).

    The peak comes from GNU time (`/usr/bin/time -f %M`) where it is installed: the `ru_maxrss`
    that `wait4` gives for a child of this process starts at this process's own RSS when it
    forked (Linux carries the high-water mark across exec), so once this process has built a set
    (hundreds of MiB) every child would read at least that. time's child forks from time."""
    with (
        tempfile.NamedTemporaryFile("r", suffix=".rss") as rss_file,
        tempfile.TemporaryFile() as out,
    ):
        gnu_time = Path("/usr/bin/time").exists()
        if gnu_time:
            cmd = ["/usr/bin/time", "-f", "%M %U %S", "-o", rss_file.name, *cmd]
        t0 = time.perf_counter()
        stdout_to = out if keep_stdout else subprocess.DEVNULL
        child = subprocess.Popen(cmd, cwd=ROOT, stdout=stdout_to, stderr=subprocess.PIPE)
        deadline = t0 + timeout_s
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                child.kill()
                _, status, usage = os.wait4(child.pid, 0)
                cpu = usage.ru_utime + usage.ru_stime
                return {"done": False, "wall_s": timeout_s, "rss_mib": math.nan, "cpu_s": cpu}
            time.sleep(0.05)
        wall = time.perf_counter() - t0
        child.returncode = os.waitstatus_to_exitcode(status)
        err = child.stderr.read().decode() if child.stderr else ""
        if child.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({child.returncode}):\n{err[-2000:]}")
        if gnu_time:
            kib, user, system = rss_file.read().split()[-3:]
            rss, cpu = int(kib) / 1024, float(user) + float(system)
        else:
            rss, cpu = usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime
        out.seek(0)
        stdout = out.read().decode()
        # CPU: the child's and its waited children's (HTA's parse workers) user + system seconds,
        # the fair figure on a shared machine, where wall time counts other jobs.
    return {"done": True, "wall_s": wall, "rss_mib": rss, "cpu_s": cpu, "stdout": stdout}


def _warm(folder: Path) -> None:
    """Read the set's files once, so the first side timed does not also wait for the disk
    while the second finds them in the page cache (a 62 MB set read cold added ~0.3 s to ours)."""
    for path in sorted(folder.iterdir()):
        with path.open("rb") as f:
            while f.read(1 << 24):
                pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="59,200", help="set sizes in MB, comma-separated")
    parser.add_argument("--work", type=Path, default=Path("/tmp/trace-sets"))
    parser.add_argument("--base", type=Path, default=DEFAULT_BASE)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument(
        "--hta-max-mb", type=float, default=float("inf"),
        help="larger sets run ours only (HTA did not finish the 4 GB set in 600 s, issue 29)",
    )  # fmt: skip
    parser.add_argument("--compare", default="nine,whole", help="comparisons, comma-separated")
    parser.add_argument(
        "--reps", type=int, default=1,
        help="runs of each side, alternating; the fastest of each is reported (the first "
        "command after a while also waits for its interpreter's files to be read)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    comparisons = args.compare.split(",")
    unknown = set(comparisons) - set(COMPARISONS)
    if unknown:
        parser.error(f"unknown comparisons {sorted(unknown)}; known: {sorted(COMPARISONS)}")
    hta_python = ensure_hta_venv()
    compile_bytecode()  # as HTA's venv has it: pip wrote its bytecode at install
    fleetscope = str(Path(sys.executable).parent / "fleetscope")
    print("| set | answers | files MB | HTA wall s | HTA CPU s | HTA peak MiB | ours wall s | "
          "ours CPU s | ours peak MiB | wall ratio | CPU ratio | memory ratio | load |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    slow_calls: list[str] = []
    for size in [float(s) for s in args.sizes.split(",")]:
        folder = args.work / f"{size:g}mb"
        if not folder.is_dir():
            build_set(args.base, folder, size)
        mb = sum(p.stat().st_size for p in folder.iterdir()) / 1e6
        _warm(folder)
        for name in comparisons:
            ours_args, hta_args = COMPARISONS[name]
            load = os.getloadavg()[0]
            ours_cmd = [fleetscope, "trace", "analyze", "--hta-compatible", str(folder),
                        "--format", "json", *ours_args]  # fmt: skip
            hta_cmd = [str(hta_python), "bench/hta_runner.py", str(folder), *hta_args]
            runs: dict[str, list[dict[str, Any]]] = {"ours": [], "hta": []}
            for _ in range(args.reps):  # alternating; each side's fastest run is reported
                runs["ours"].append(_run(ours_cmd, args.timeout))
                if size <= args.hta_max_mb:
                    runs["hta"].append(_run(hta_cmd, args.timeout, keep_stdout=True))
            ours = min(runs["ours"], key=lambda r: r["wall_s"])
            if runs["hta"]:
                hta = min(runs["hta"], key=lambda r: (not r["done"], r["wall_s"]))
                hta_wall = (
                    f"{hta['wall_s']:.1f}" if hta["done"] else f"not done in {args.timeout:g}"
                )
                if hta["done"]:
                    timings = json.loads(hta["stdout"])
                    slow = ", ".join(
                        f"{call} {s:.1f}" for call, s in timings["calls_s"].items() if s >= 1.0
                    )
                    slow_calls.append(
                        f"{size:g} MB, {name}: load {timings['load_s'][0]:.1f}; {slow}"
                    )
            else:
                hta = {"done": False, "rss_mib": float("nan"), "cpu_s": float("nan")}
                hta_wall = "not run"
            load_end = os.getloadavg()[0]
            ratio = f"{hta['wall_s'] / ours['wall_s']:.1f}x" if hta["done"] else "-"
            cpu = f"{hta['cpu_s'] / ours['cpu_s']:.1f}x" if hta["done"] else "-"
            memory = f"{ours['rss_mib'] / hta['rss_mib']:.2f}" if hta["done"] else "-"
            print(
                f"| {size:g} MB | {name} | {mb:.0f} | {hta_wall} | "
                f"{hta.get('cpu_s', math.nan):.1f} | {hta['rss_mib']:.0f} | {ours['wall_s']:.1f} | "
                f"{ours.get('cpu_s', math.nan):.1f} | {ours['rss_mib']:.0f} | {ratio} | {cpu} | "
                f"{memory} | {load:.1f}-{load_end:.1f} |",
                flush=True,
            )
    print("\nHTA's load and its calls of 1 s or more, wall s (hta_runner.py's `calls_s`):")
    for line in slow_calls:
        print(f"- {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
