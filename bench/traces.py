"""Trace load plus analyses: fleetscope against HolisticTraceAnalysis 0.5.0, same traces, same run.

    .venv/bin/python -m bench.traces [--quick] [--reps N] [--no-write]

For each golden trace (tests/data/traces/*), runs, interleaved rep by rep, each in a fresh process
so peak memory is that run's own:

- HTA: `TraceAnalysis(trace_dir)` and its 9 analysis calls (bench/hta_runner.py, in HTA's own
  virtual environment, created here if missing: `$FLEETSCOPE_HTA_VENV`, default /tmp/hta-venv,
  with `holistictraceanalysis==0.5.0 "pandas<3"`);
- fleetscope `--hta-compatible`: load plus the same 8 analyses (like for like), and separately
  every registered analysis plus the trace rules;
- fleetscope native: load plus all 17 analyses plus rules.

Reports the median wall time and the peak RSS (`ru_maxrss` of the process), and writes them under
"## Trace analysis (issue 4)" in bench/RESULTS.md (other sections are left as they are).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "traces"
RESULTS = ROOT / "bench" / "RESULTS.md"
SECTION = "## Trace analysis (issue 4)"
QUICK = ("hta_amd_mi250_minitoy", "hta_nccl_data_rank0")
HTA_SPEC = ("holistictraceanalysis==0.5.0", "pandas<3")
HTA_ANALYSES = (
    "temporal_breakdown",
    "idle_time",
    "kernel_breakdown",
    "comm_comp_overlap",
    "launch_stats",
    "queue_length",
    "memory_bw",
    "user_annotation",
)


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def child(trace_dir: str, mode: str) -> dict[str, Any]:
    """One fleetscope run in this process: timings and peak RSS."""
    rss_start = _rss_mib()
    t0 = time.perf_counter()
    from analyzers.traces.analyses import load_registry
    from analyzers.traces.analyses.base import TraceOptions
    from analyzers.traces.api import load_trace_set, run_analyses
    from analyzers.traces.findings import trace_findings

    load_registry()  # importing the analysis modules is import time, as HTA's import is
    import_s = time.perf_counter() - t0
    rss_import = _rss_mib()
    t0 = time.perf_counter()
    trace = load_trace_set(trace_dir, hta_compatible=mode != "native")
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    names = HTA_ANALYSES if mode == "hta-same" else None
    results = run_analyses(trace, names=names)
    if names is None:
        trace_findings(trace, results, TraceOptions())
    analyses_s = time.perf_counter() - t0
    return {
        "import_s": import_s,
        "load_s": load_s,
        "analyses_s": analyses_s,
        "rss_start_mib": rss_start,
        "rss_after_import_mib": rss_import,
        "rss_peak_mib": _rss_mib(),
    }


def ensure_hta_venv() -> Path:
    venv = Path(os.environ.get("FLEETSCOPE_HTA_VENV", "/tmp/hta-venv"))
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import hta, pandas; assert pandas.__version__ < '3'"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    print(f"creating HTA's virtual environment in {venv} ...", file=sys.stderr)
    base = (
        "python3.11"
        if subprocess.run(["which", "python3.11"], capture_output=True).returncode == 0
        else sys.executable
    )
    subprocess.run([base, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *HTA_SPEC], check=True)
    return python


def _run_json(cmd: list[str]) -> dict[str, Any]:
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def bench_trace(trace_dir: Path, hta_python: Path, reps: int) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {"hta": [], "hta-same": [], "hta-all": [], "native": []}
    ours = [sys.executable, "-m", "bench.traces", "--child", str(trace_dir), "--mode"]
    for _ in range(reps):
        runs["hta"].append(_run_json([str(hta_python), "bench/hta_runner.py", str(trace_dir)]))
        for mode in ("hta-same", "hta-all", "native"):
            runs[mode].append(_run_json([*ours, mode]))

    def median(mode: str, key: str) -> float:
        values = [r[key][0] if isinstance(r[key], list) else r[key] for r in runs[mode]]
        return float(statistics.median(values))

    def total(mode: str) -> float:
        return float(
            statistics.median(
                (r["load_s"][0] + r["analyses_s"][0])
                if mode == "hta"
                else r["load_s"] + r["analyses_s"]
                for r in runs[mode]
            )
        )

    files = [p for p in trace_dir.iterdir() if p.is_file()]
    return {
        "trace": trace_dir.name,
        "gz_mb": sum(p.stat().st_size for p in files) / 1e6,
        "hta_s": total("hta"),
        "hta_load_s": median("hta", "load_s"),
        "hta_rss_mib": median("hta", "rss_at_end_mib"),
        "hta_rss_import_mib": median("hta", "rss_after_import_mib"),
        "hta_errors": sorted(runs["hta"][0]["errors"]),
        "same_s": total("hta-same"),
        "same_load_s": median("hta-same", "load_s"),
        "same_rss_mib": median("hta-same", "rss_peak_mib"),
        "all_s": total("hta-all"),
        "native_s": total("native"),
        "native_rss_mib": median("native", "rss_peak_mib"),
        "ours_rss_import_mib": median("hta-same", "rss_after_import_mib"),
    }


def render(rows: list[dict[str, Any]], reps: int, command: str) -> str:
    lines = [
        SECTION,
        "",
        f"Command: `{command}` ({reps} interleaved reps per trace, median; each run a fresh "
        f"process). Machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; HTA 0.5.0 with pandas 2.x in its own venv. Times are load "
        "plus analyses (imports excluded); memory is the process's peak RSS (imports included: "
        "HTA's pandas/plotly stack is ~96 MiB before it reads anything, ours ~30 MiB). As a "
        'user runs it, process start and imports included: section "Trace analysis as a whole '
        'command (issue 19)" (bench/trace_command.py).',
        "",
        "| trace | gz MB | HTA s | fleetscope --hta-compatible, same 8 analyses s | speed-up | "
        "fleetscope all 17 + rules (HTA mode / native) s | HTA peak MiB | fleetscope peak MiB | "
        "memory ratio |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['trace']} | {r['gz_mb']:.2f} | {r['hta_s']:.3f} | {r['same_s']:.3f} | "
            f"{r['hta_s'] / r['same_s']:.1f}x | {r['all_s']:.3f} / {r['native_s']:.3f} | "
            f"{r['hta_rss_mib']:.0f} | {r['same_rss_mib']:.0f} / {r['native_rss_mib']:.0f} | "
            f"{r['same_rss_mib'] / r['hta_rss_mib']:.2f} |"
        )
    hta = sum(r["hta_s"] for r in rows)
    same = sum(r["same_s"] for r in rows)
    every = sum(r["all_s"] for r in rows)
    lines += [
        f"| **all traces** | {sum(r['gz_mb'] for r in rows):.2f} | {hta:.3f} | {same:.3f} | "
        f"{hta / same:.1f}x | {every:.3f} / {sum(r['native_s'] for r in rows):.3f} | "
        f"max {max(r['hta_rss_mib'] for r in rows):.0f} | "
        f"max {max(r['same_rss_mib'] for r in rows):.0f} | "
        f"{max(r['same_rss_mib'] for r in rows) / max(r['hta_rss_mib'] for r in rows):.2f} |",
        "",
        "HTA raised on: "
        + (
            "; ".join(
                f"{r['trace']}: {', '.join(r['hta_errors'])}" for r in rows if r["hta_errors"]
            )
            or "nothing"
        )
        + ".",
        "",
    ]
    return "\n".join(lines)


def write_section(text: str) -> None:
    """Replace (or append) this benchmark's section of bench/RESULTS.md, nothing else."""
    old = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    start = old.find(SECTION)
    if start < 0:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        nxt = old.find("\n## ", start + len(SECTION))
        new = old[:start] + text + (old[nxt + 1 :] if nxt >= 0 else "")
    RESULTS.write_text(new.rstrip("\n") + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two small traces, one rep")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="do not update bench/RESULTS.md")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="hta-same", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.mode)))
        return 0
    hta_python = ensure_hta_venv()
    names = (
        QUICK
        if args.quick
        else sorted(p.name for p in DATA.iterdir() if p.is_dir() and p.name != "edge_cases")
    )
    reps = 1 if args.quick else args.reps
    rows = []
    for name in names:
        row = bench_trace(DATA / name, hta_python, reps)
        rows.append(row)
        print(
            f"{name:32s} HTA {row['hta_s']:.3f}s {row['hta_rss_mib']:.0f}MiB | fleetscope "
            f"{row['same_s']:.3f}s {row['same_rss_mib']:.0f}MiB ({row['hta_s'] / row['same_s']:.1f}x) "
            f"| all {row['all_s']:.3f}s native {row['native_s']:.3f}s",
            flush=True,
        )
    command = "python -m bench.traces" + (" --quick" if args.quick else f" --reps {reps}")
    text = render(rows, reps, command)
    print(text)
    if not args.no_write and not args.quick:
        write_section(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
