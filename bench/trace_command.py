"""Trace analysis as the user runs it: `fleetscope trace analyze --hta-compatible` against HTA
0.5.0's whole run, each a fresh process, interleaved in one run.

    .venv/bin/python -m bench.trace_command [--reps N] [--quick] [--traces DIR] [--no-write]
                                            [--before TREE] [--editable]

Why a whole command: bench/traces.py times load plus analyses inside a process, which leaves out
interpreter start and imports; a user pays those on every run (issue 19 measured 5.0x as a whole
command against 9.3x without them). Here each side is one subprocess, timed from `fork` to exit:

- ours: `fleetscope trace analyze --hta-compatible DIR --format json` (process start, imports,
  load, every registered analysis, the trace rules, the JSON printed to a pipe), as installed: a
  wheel of this tree installed into a venv of its own (`install_wheel`: bytecode compiled at
  install, no editable finder), or with `--editable` this checkout's venv, byte-compiled first;
- HTA: `$FLEETSCOPE_HTA_VENV/bin/python bench/hta_runner.py DIR` (import, `TraceAnalysis(DIR)`,
  its 9 analysis calls), in HTA's own virtual environment (created if missing, as bench.traces).

`--before TREE` also times the same command from another source tree (e.g. `git archive main`
extracted), run as `python -c 'from app.cli import main; ...'` with TREE as the working directory
(so its packages come first), in the same reps: a before/after of a change in one run.

Reps go trace by trace, peer and ours back to back, so load from other processes hits both alike;
the load average (`os.getloadavg`) is recorded before every pair. The median per trace is kept.

The floor: the same file gunzipped (in the loader's reads) plus the fastest typed decode there
is of the fields our columns read, of the text in memory, nothing else: the C column pass (analyzers/traces/_kineto_columns.c) over the whole
`traceEvents` array in one call where it is built and takes the file, else msgspec's structs;
against our load (`load_trace_set(..., hta_compatible=True)`: chunked inflate, the rank search,
UTF-8 check, columns joined, HTA's load rules), both in one child process after imports. Traces are read in place (default /work/shared/data/traces,
`--traces` or `$FLEETSCOPE_TRACE_DIR` to point elsewhere); nothing is copied into the repository.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.traces import ensure_hta_venv

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "RESULTS.md"
SECTION = "## Trace analysis as a whole command (issue 19; one engine since issue 29)"
DEFAULT_TRACES = Path(os.environ.get("FLEETSCOPE_TRACE_DIR", "/work/shared/data/traces"))
QUICK = ("hta_amd_mi250_minitoy", "hta_nccl_data_rank0")
FLOOR_KEY = "whole-command speed-up over HTA, slowest trace"
# Below this run's worst figure, for the noise of a shared machine; not the 10x target.
FLOOR_X = 3.0


# The project's packages ([tool.setuptools.packages.find] in pyproject.toml).
PACKAGES = ("fleetscope", "app", "collector", "warehouse", "analyzers", "dashboard", "simulator")


def compile_bytecode() -> None:
    """Byte-compile the project as `pip install` does. This checkout is an editable install and
    PYTHONDONTWRITEBYTECODE=1 is set here, so without this step every run compiles ~50 modules
    from source (~36 ms), a cost no installed copy has; HTA's venv was installed from wheels,
    its bytecode written at install. The variable only stops writing at import, so the
    `__pycache__` files written here are read by every timed run."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", *PACKAGES],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )


# In this checkout's ignored build/ folder: it is rebuilt on every run, so a shared path (it was
# /tmp) let two checkouts' runs delete each other's venv mid-run.
WHEEL_VENV = ROOT / "build" / "bench-wheel-venv"


def install_wheel() -> Path:
    """This checkout installed as `pip install fleetscope` installs it: a wheel built from the tree,
    installed (bytecode compiled at install) into a venv of its own; returns its `bin` folder.
    Its dependencies are this venv's site-packages, put on its path by a `.pth` (the same
    packages, without the editable finder that site runs at every start of this checkout's
    venv, ~10 ms)."""
    shutil.rmtree(WHEEL_VENV, ignore_errors=True)
    pip = [sys.executable, "-m", "pip"]
    with tempfile.TemporaryDirectory() as wheels:
        # The build's warnings (setuptools' experimental ext-modules) are noise here.
        _timed([*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", wheels, str(ROOT)])
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(WHEEL_VENV)], check=True)
        python = WHEEL_VENV / "bin" / "python"
        wheel = next(Path(wheels).glob("fleetscope-*.whl"))
        _timed([*pip, "--python", str(python), "install", "-q", "--no-deps", str(wheel)])
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(site) / "fleetscope-bench-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return WHEEL_VENV / "bin"


def ours_bin(editable: bool) -> Path:
    """The `bin` folder whose `fleetscope` and `python` are timed: a wheel install (default), or
    this checkout's editable venv, byte-compiled first."""
    compile_bytecode()  # the floor child and `--before` run from this checkout
    return Path(sys.executable).parent if editable else install_wheel()


def _load() -> float:
    return os.getloadavg()[0]


def _timed(
    cmd: list[str], cwd: Path = ROOT, env: dict[str, str] | None = None
) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env)
    elapsed = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return elapsed, out.stdout


def floor_child(trace_dir: str) -> dict[str, float]:
    """Our load against gunzip + typed decode of the same files, in this process."""
    import msgspec

    from analyzers.traces.api import find_trace_files, load_trace_set
    from analyzers.traces.columns import CHUNK_SIZE as _CHUNK
    from analyzers.traces.columns import SymbolTable
    from analyzers.traces.load_fast import _decode_columns
    from analyzers.traces.trace_text import _open_gzip
    from bench.trace_decoders import _Args, _Event  # the typed structs live with the bench now

    # The loader's own event type; where a trace has a value of another type (a string stream
    # id in the AMD trace) the same fields as Any, so the floor always decodes the whole file.
    strict = msgspec.json.Decoder(msgspec.defstruct("Doc", [("traceEvents", list[_Event])]))
    loose_args = msgspec.defstruct(
        "LooseArgs",
        [(f, Any, None) for f in _Args.__struct_fields__],
        rename=dict(zip(_Args.__struct_fields__, _Args.__struct_encode_fields__, strict=True)),
    )
    loose_event = msgspec.defstruct(
        "LooseEvent",
        [(f, Any, None) for f in _Event.__struct_fields__ if f != "args"]
        + [("args", loose_args | None, None)],
    )
    loose = msgspec.json.Decoder(
        msgspec.defstruct("LooseDoc", [("traceEvents", list[loose_event])])
    )

    def decoder_for(path: Path) -> Callable[[bytes], object]:
        """The fastest typed decode of the file, chosen before timing (a failed try is not
        counted): the C column pass over the `traceEvents` array where it takes the whole array
        in one call (it stops at an odd element, such as a string stream id), else msgspec's structs."""
        with _open_gzip(path, "rb") as stream:
            text = stream.read()
        events = _events_span(text)
        if events is not None:
            start, end = events
            # The pass took the whole array when it stopped at the `]` that closes it.
            if _decode_columns(memoryview(text)[start:end], 0, SymbolTable())[1] == end - start - 1:
                return lambda text: _decode_columns(memoryview(text)[start:end], 0, SymbolTable())
        try:
            strict.decode(text)
        except msgspec.ValidationError:
            return loose.decode
        return strict.decode

    files = find_trace_files(trace_dir)
    decoders = [decoder_for(f) for f in files]
    texts = []
    for f in files:
        with _open_gzip(f, "rb") as stream:
            texts.append(stream.read())
    best_decode = best_load = best_gunzip = float("inf")
    for _ in range(3):
        # Inflate in the loader's 1 MiB reads (zlib-ng when installed), the text discarded: one
        # read of a whole 35 MB text costs its page faults twice over (~20 ms), which no
        # streaming loader pays. The decode is timed on the text already in memory.
        t0 = time.perf_counter()
        for f in files:
            with _open_gzip(f, "rb") as stream:
                while stream.read(_CHUNK):
                    pass
        t1 = time.perf_counter()
        for decode, text in zip(decoders, texts, strict=True):
            decode(text)
        t2 = time.perf_counter()
        load_trace_set(trace_dir, hta_compatible=True)
        t3 = time.perf_counter()
        best_gunzip = min(best_gunzip, t1 - t0)
        best_decode = min(best_decode, t2 - t1)
        best_load = min(best_load, t3 - t2)
    best_floor = best_gunzip + best_decode
    return {"gunzip_s": best_gunzip, "floor_s": best_floor, "load_s": best_load}


def _events_span(text: bytes) -> tuple[int, int] | None:
    """Where the `traceEvents` array is in the text (found untimed, for the floor's C pass)."""
    import msgspec

    raw = bytes(msgspec.json.Decoder(dict[str, msgspec.Raw]).decode(text)["traceEvents"])
    start = text.find(b"[", text.find(b'"traceEvents"'))
    end = start + len(raw)
    return (start, end) if start >= 0 and text[start:end] == raw else None


def bench_trace(
    trace_dir: Path, hta_python: Path, reps: int, bin_dir: Path, before: Path | None = None
) -> dict[str, Any]:
    fleetscope = str(bin_dir / "fleetscope")
    args = ["trace", "analyze", "--hta-compatible", str(trace_dir), "--format", "json"]
    ours_cmd = [fleetscope, *args]
    hta_cmd = [str(hta_python), "bench/hta_runner.py", str(trace_dir)]
    before_cmd = [sys.executable, "-c", "import sys; from app.cli import main; sys.exit(main())"]
    before_cmd += args
    times: dict[str, list[float]] = {"hta": [], "ours": [], "before": []}
    loads: list[float] = []
    for rep in range(reps):
        loads.append(_load())
        runs = [("hta", hta_cmd, ROOT), ("ours", ours_cmd, ROOT)]
        if before is not None:
            runs.append(("before", before_cmd, before))
        for name, cmd, cwd in runs if rep % 2 == 0 else runs[::-1]:
            times[name].append(_timed(cmd, cwd)[0])
    hta_s, ours_s = times["hta"], times["ours"]
    _, floor_out = _timed(
        [sys.executable, "-m", "bench.trace_command", "--floor-child", str(trace_dir)]
    )
    floor = json.loads(floor_out.strip().splitlines()[-1])
    files = [p for p in trace_dir.iterdir() if p.is_file()]
    hta, ours = statistics.median(hta_s), statistics.median(ours_s)
    return {
        "trace": trace_dir.name,
        "gz_mb": sum(p.stat().st_size for p in files) / 1e6,
        "hta_s": hta,
        "ours_s": ours,
        "speedup": hta / ours,
        "load_min": min(loads),
        "load_max": max(loads),
        "before_s": statistics.median(times["before"]) if times["before"] else None,
        **floor,
    }


def render(
    rows: list[dict[str, Any]],
    reps: int,
    command: str,
    startup: dict[str, float],
    editable: bool = False,
) -> str:
    worst = min(r["speedup"] for r in rows)
    hta = sum(r["hta_s"] for r in rows)
    ours = sum(r["ours_s"] for r in rows)
    lines = [
        SECTION,
        "",
        f"Command: `{command}` ({reps} reps per trace, HTA and ours back to back, alternating who "
        "goes first, median; every run a fresh process timed from start to exit). Traces: every "
        "folder of /work/shared/data/traces except edge_cases/ (CPU-only and rank-less fragments, "
        "on which HTA raises), read in place. Ours: `fleetscope trace analyze --hta-compatible "
        "DIR --format json` (every registered analysis and the trace rules). HTA: "
        "`bench/hta_runner.py DIR` "
        "(import, `TraceAnalysis`, its 9 analysis calls). Load = 1-minute load average before "
        "each pair (the 2-core machine was shared with 5 other engineers' jobs).",
        "",
        "Both sides are timed as installed: HTA's venv from wheels; ours "
        + (
            "this checkout's editable venv, byte-compiled first (`compileall`, as `pip install` "
            "does; it still pays the editable finder below)."
            if editable
            else "a wheel of this tree installed into a venv of its own (bytecode compiled at "
            "install, no editable finder; `install_wheel`), its dependencies this venv's."
        ),
        "",
        f"Start-up alone, same run: `fleetscope --version` {startup['version_s']:.3f} s, "
        f"`python -c pass` {startup['python_s']:.3f} s, `python -c 'import numpy, msgspec'` "
        f"{startup['numpy_s']:.3f} s with one OpenBLAS thread as `trace analyze` imports them "
        f"({startup['numpy_pool_s']:.3f} s with OpenBLAS's thread pool), HTA's venv `python -c 'import "
        f"hta.trace_analysis'` {startup['hta_import_s']:.3f} s.",
        "",
        "| trace | gz MB | HTA whole run s | fleetscope whole command s | speed-up | load | "
        "our load s | floor s (gunzip + typed decode) | of which gunzip s | load / floor |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['trace']} | {r['gz_mb']:.2f} | {r['hta_s']:.3f} | {r['ours_s']:.3f} | "
            f"{r['speedup']:.1f}x | {r['load_min']:.1f}-{r['load_max']:.1f} | {r['load_s']:.3f} | "
            f"{r['floor_s']:.3f} | {r['gunzip_s']:.3f} | {r['load_s'] / r['floor_s']:.2f} |"
        )
    lines += [
        f"| **all traces** | {sum(r['gz_mb'] for r in rows):.2f} | {hta:.3f} | {ours:.3f} | "
        f"{hta / ours:.1f}x | | {sum(r['load_s'] for r in rows):.3f} | "
        f"{sum(r['floor_s'] for r in rows):.3f} | {sum(r['gunzip_s'] for r in rows):.3f} | "
        f"{sum(r['load_s'] for r in rows) / sum(r['floor_s'] for r in rows):.2f} |",
        "",
        _verdict(rows, startup, editable),
        "",
        *_before_after(rows),
        f"Floor for `make bench-quick` ({FLOOR_KEY}): **floor {FLOOR_X:g}x**; this run: "
        f"{worst:.1f}x.",
        "",
    ]
    return "\n".join(lines)


def _verdict(rows: list[dict[str, Any]], startup: dict[str, float], editable: bool) -> str:
    """What the figures say, from this run: the one numpy engine, no start-up tricks (issue 29)."""
    worst = min(rows, key=lambda r: r["speedup"])
    hta = sum(r["hta_s"] for r in rows)
    ours = sum(r["ours_s"] for r in rows)
    return (
        f"One engine (numpy), the files loaded in process (issue 29 removed the small-trace "
        f"engine, the forked prefetch and standby, and their switches). Slowest trace "
        f"{worst['trace']} {worst['speedup']:.1f}x, all traces {hta / ours:.1f}x. Of our whole "
        f"command, starting Python and importing numpy and msgspec alone take "
        f"{startup['numpy_s']:.3f} s"
        + (
            f"; this editable checkout's finder adds {startup['editable_s']:.3f} s"
            if editable
            else ""
        )
        + "; the rest is our imports, the load (table) and the 17 analyses and rules."
    )


def _before_after(rows: list[dict[str, Any]]) -> list[str]:
    """The `--before` tree's whole command against ours, same reps (empty without it)."""
    if any(r["before_s"] is None for r in rows):
        return []
    before = sum(r["before_s"] for r in rows)
    ours = sum(r["ours_s"] for r in rows)
    per_trace = ", ".join(f"{r['trace']} {r['before_s']:.3f} -> {r['ours_s']:.3f} s" for r in rows)
    return [
        f"Before -> after, same reps (`--before`): {per_trace}; all traces {before:.3f} -> "
        f"{ours:.3f} s; against HTA {sum(r['hta_s'] for r in rows) / before:.1f}x -> "
        f"{sum(r['hta_s'] for r in rows) / ours:.1f}x.",
        "",
    ]


def startup_times(hta_python: Path, bin_dir: Path) -> dict[str, float]:
    fleetscope = str(bin_dir / "fleetscope")
    python = str(bin_dir / "python")

    def best(cmd: list[str], env: dict[str, str] | None = None) -> float:
        return min(_timed(cmd, env=env)[0] for _ in range(3))

    return {
        "editable_s": editable_finder_s(),
        "version_s": best([fleetscope, "--version"]),
        "python_s": best([python, "-c", "pass"]),
        "numpy_s": best(
            [python, "-c", "import numpy, msgspec"],
            dict(os.environ, OPENBLAS_NUM_THREADS="1"),
        ),
        "numpy_pool_s": best([python, "-c", "import numpy, msgspec"]),
        "hta_import_s": best([str(hta_python), "-c", "import hta.trace_analysis"]),
    }


def editable_finder_s() -> float:
    """What the editable install's finder (a `.pth` that site imports at every start) costs, from
    `-X importtime`: a wheel install has no finder, so this is a cost only of this checkout."""
    best = float("inf")
    for _ in range(3):
        out = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "pass"], capture_output=True, text=True
        )
        total = sum(
            int(line.split("|")[1])
            for line in out.stderr.splitlines()
            if "__editable__" in line and line.rstrip().endswith("_finder")
        )
        best = min(best, total / 1e6)
    return best


def write_section(text: str) -> None:
    """Replace (or append) the section of bench/RESULTS.md headed by `text`'s first line."""
    section = text.split("\n", 1)[0]
    old = RESULTS.read_text()
    start = old.find(section)
    if start < 0:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        nxt = old.find("\n## ", start + len(section))
        new = old[:start] + text.rstrip("\n") + "\n\n" + (old[nxt + 1 :] if nxt >= 0 else "")
    RESULTS.write_text(new.rstrip("\n") + "\n")


def run(
    traces: Path,
    reps: int,
    quick: bool,
    before: Path | None = None,
    bin_dir: Path | None = None,
) -> list[dict[str, Any]]:
    """Time every trace folder (or the quick two); `bin_dir` is `ours_bin()`'s (made here if
    not given)."""
    hta_python = ensure_hta_venv()
    bin_dir = bin_dir or ours_bin(editable=False)
    names = (
        QUICK
        if quick
        else sorted(p.name for p in traces.iterdir() if p.is_dir() and p.name != "edge_cases")
    )
    rows = []
    for name in names:
        row = bench_trace(traces / name, hta_python, reps, bin_dir, before)
        rows.append(row)
        print(
            f"{name:32s} HTA {row['hta_s']:.3f}s ours {row['ours_s']:.3f}s "
            f"({row['speedup']:.1f}x) load {row['load_min']:.1f}-{row['load_max']:.1f} | "
            f"our load {row['load_s']:.3f}s floor {row['floor_s']:.3f}s"
            + (f" | before {row['before_s']:.3f}s" if before is not None else ""),
            flush=True,
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two small traces, 3 reps")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES)
    parser.add_argument("--no-write", action="store_true", help="do not update bench/RESULTS.md")
    parser.add_argument(
        "--before", type=Path, help="also time the command from this source tree (same reps)"
    )
    parser.add_argument(
        "--editable",
        action="store_true",
        help="time this checkout's editable venv (byte-compiled) instead of a wheel install",
    )
    parser.add_argument("--floor-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.floor_child:
        print(json.dumps(floor_child(args.floor_child)))
        return 0
    reps = 3 if args.quick else args.reps
    bin_dir = ours_bin(args.editable)
    startup = startup_times(ensure_hta_venv(), bin_dir)
    rows = run(args.traces, reps, args.quick, args.before, bin_dir)
    command = "python -m bench.trace_command" + (" --quick" if args.quick else f" --reps {reps}")
    if args.editable:
        command += " --editable"
    if args.before is not None:
        command += f" --before {args.before}"
    text = render(rows, reps, command, startup, args.editable)
    print(text)
    if not args.no_write and not args.quick:
        write_section(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
