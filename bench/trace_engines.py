"""The small-trace engine (listnp) against the numpy engine and HTA, as whole commands, on windows
of growing size cut out of real traces: where the lite engine pays, and the 10x line on small
traces (issue 19).

    .venv/bin/python -m bench.trace_engines [--reps N] [--events 100,250,...] [--no-hta] [--no-write]

For each source trace (bench/trace_slices.py: a window from 40 % into its events, every other
top-level key kept) and window size, in one run and interleaved rep by rep: HTA 0.5.0's whole run
(bench/hta_runner.py in its venv), and `fleetscope trace analyze --hta-compatible DIR --format
json` as installed (bench.trace_command's wheel venv) three ways: FLEETSCOPE_TRACE_ENGINE=lite,
=numpy, and unset (the engine the command picks by size, engine.LITE_MAX_TEXT_BYTES). Medians.
Each window is also run once where a lite run that cannot answer exactly raises instead of
re-running on numpy, to say whether listnp answered itself, and its output is compared with the
numpy engine's byte for byte. The crossover, the text size above which the lite command is no
faster than the numpy one, is what `LITE_MAX_TEXT_BYTES` is set from.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from analyzers.traces.engine import LITE_MAX_TEXT_BYTES, text_bytes
from analyzers.traces.xp import ENV
from bench.trace_command import DEFAULT_TRACES, ROOT, _load, _timed, ours_bin, write_section
from bench.trace_slices import read_trace, write_window
from bench.traces import ensure_hta_venv

SECTION = "## Trace analysis engines: listnp against numpy on small traces (issue 19)"
SOURCES = ("hta_nccl_data_rank0", "tracelens_b200_eager", "kineto_resnet50_nw0")
EVENTS = (100, 250, 500, 1000, 2000, 4000)
ENGINES = ("lite", "numpy", "auto")


def _answered_on_lite(trace: Path, numpy_stdout: str) -> bool:
    """Whether listnp answers this trace itself with the numpy engine's exact output."""
    code = (
        "import sys; from analyzers.traces import xp; xp.choose('lite'); "
        "from app.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    args = ["trace", "analyze", "--hta-compatible", str(trace), "--format", "json"]
    env = {k: v for k, v in os.environ.items() if k != ENV}
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, env=env
    )
    return out.returncode == 0 and out.stdout == numpy_stdout


def bench_window(trace: Path, hta_python: Path | None, reps: int, bin_dir: Path) -> dict[str, Any]:
    args = ["trace", "analyze", "--hta-compatible", str(trace), "--format", "json"]
    base = {k: v for k, v in os.environ.items() if k != ENV}
    envs = {"lite": {**base, ENV: "lite"}, "numpy": {**base, ENV: "numpy"}, "auto": base}
    runs: list[tuple[str, list[str], dict[str, str] | None]] = [
        (name, [str(bin_dir / "fleetscope"), *args], envs[name]) for name in ENGINES
    ]
    if hta_python is not None:
        hta_cmd = [str(hta_python), "bench/hta_runner.py", str(trace)]
        # HTA raises on some windows (a cut that leaves no kernel, or no `dur` column at all):
        # those rows have no HTA figure.
        if subprocess.run(hta_cmd, capture_output=True, cwd=ROOT).returncode == 0:
            runs.append(("hta", hta_cmd, None))
    times: dict[str, list[float]] = {name: [] for name, _, _ in runs}
    loads = []
    outputs: dict[str, str] = {}
    for rep in range(reps):
        loads.append(_load())
        for name, cmd, env in runs if rep % 2 == 0 else runs[::-1]:
            elapsed, stdout = _timed(cmd, env=env)
            times[name].append(elapsed)
            outputs.setdefault(name, stdout)
    row: dict[str, Any] = {f"{name}_s": statistics.median(t) for name, t in times.items()}
    events = len(read_trace(next(trace.iterdir()))["traceEvents"])
    row.update(
        trace=trace.name,
        events=events,
        text_kib=(text_bytes([trace]) or 0) / 1024,
        identical=outputs["lite"] == outputs["numpy"] == outputs["auto"],
        answered=_answered_on_lite(trace, outputs["numpy"]),
        load_min=min(loads),
        load_max=max(loads),
    )
    return row


FLOOR_KEY = "small trace, numpy engine's whole command / the command's"
# Below the full runs' 1.6-2.2x on windows of 100-250 events, for a shared machine's noise.
FLOOR_X = 1.2


def quick_ratio(reps: int = 3) -> float:
    """`make bench-quick`: the numpy engine's whole command over the command as a user runs it
    (lite, by size) on a 250-event window of tracelens_b200_eager, no HTA."""
    document = read_trace(next((DEFAULT_TRACES / "tracelens_b200_eager").glob("*.gz")))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "tracelens_b200_eager-250"
        write_window(document, int(len(document["traceEvents"]) * 0.4), 250, folder / "trace.json")
        row = bench_window(folder, None, reps, ours_bin(editable=False))
    return float(row["numpy_s"] / row["auto_s"])


def render(rows: list[dict[str, Any]], command: str, with_hta: bool) -> str:
    lines = [
        SECTION,
        "",
        f"Command: `{command}`. Module docstring (bench/trace_engines.py) for the method. "
        f"`auto` is the command as a user runs it: lite up to {LITE_MAX_TEXT_BYTES // 1024} KiB "
        "of JSON text, numpy above. Load: 1-minute load average before each rep.",
        "",
    ]
    head = "| window | events | text KiB | lite s | numpy s | auto s |"
    rule = "|---|---:|---:|---:|---:|---:|"
    if with_hta:
        head += " HTA s | auto speed-up |"
        rule += "---:|---:|"
    head += " lite answered itself | outputs identical | load |"
    rule += "---|---|---|"
    lines += [head, rule]
    for r in rows:
        line = (
            f"| {r['trace']} | {r['events']} | {r['text_kib']:.0f} | {r['lite_s']:.3f} | "
            f"{r['numpy_s']:.3f} | {r['auto_s']:.3f} |"
        )
        if with_hta and "hta_s" in r:
            line += f" {r['hta_s']:.3f} | {r['hta_s'] / r['auto_s']:.1f}x |"
        elif with_hta:
            line += " HTA raised | |"
        line += (
            f" {'yes' if r['answered'] else 'no (numpy answered)'} | "
            f"{'yes' if r['identical'] else 'NO'} | {r['load_min']:.1f}-{r['load_max']:.1f} |"
        )
        lines.append(line)
    slower = [r["text_kib"] for r in rows if r["answered"] and r["lite_s"] >= r["numpy_s"]]
    faster = [r["text_kib"] for r in rows if r["answered"] and r["lite_s"] < r["numpy_s"]]
    lines += [
        "",
        f"Lite faster than numpy up to {max(faster, default=0):.0f} KiB of text; "
        f"no faster from {min(slower, default=float('nan')):.0f} KiB on "
        f"(engine.LITE_MAX_TEXT_BYTES = {LITE_MAX_TEXT_BYTES // 1024} KiB).",
    ]
    timed = [r for r in rows if "hta_s" in r]
    if timed:
        worst = min(timed, key=lambda r: r["hta_s"] / r["auto_s"])
        lines.append(
            f"Slowest window against HTA, as a user runs it: {worst['trace']} "
            f"{worst['hta_s'] / worst['auto_s']:.1f}x."
        )
    lines += ["", f"Floor for `make bench-quick` ({FLOOR_KEY}): **floor {FLOOR_X:g}x**."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--events", default=",".join(map(str, EVENTS)))
    parser.add_argument("--sources", default=",".join(SOURCES))
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES)
    parser.add_argument("--no-hta", action="store_true", help="time our engines only")
    parser.add_argument("--no-write", action="store_true", help="do not update bench/RESULTS.md")
    args = parser.parse_args(argv)
    hta_python = None if args.no_hta else ensure_hta_venv()
    bin_dir = ours_bin(editable=False)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for source in args.sources.split(","):
            (file,) = [
                p for p in (args.traces / source).iterdir() if p.name.endswith((".gz", ".json"))
            ]
            document = read_trace(file)
            start = int(len(document["traceEvents"]) * 0.4)
            for events in map(int, args.events.split(",")):
                folder = Path(tmp) / f"{source}-{events}"
                write_window(document, start, events, folder / "trace.json")
                row = bench_window(folder, hta_python, args.reps, bin_dir)
                rows.append(row)
                print(
                    f"{row['trace']:32s} {row['text_kib']:7.0f} KiB lite {row['lite_s']:.3f}s "
                    f"numpy {row['numpy_s']:.3f}s auto {row['auto_s']:.3f}s"
                    + (f" HTA {row['hta_s']:.3f}s" if "hta_s" in row else "")
                    + f" answered={row['answered']} identical={row['identical']}",
                    flush=True,
                )
    command = "python -m bench.trace_engines " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    text = render(rows, command.strip(), hta_python is not None)
    print(text)
    if not args.no_write:
        write_section(text)
    return 0 if all(r["identical"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
