"""Run HolisticTraceAnalysis 0.5.0 on one trace folder; the peer side of bench/traces.py.

Runs inside HTA's own virtual environment (HTA needs pandas < 3; fleetscope's has pandas 3), so it
imports nothing from fleetscope. It times `TraceAnalysis(trace_dir)` (the load) and the nine
analyses of HTA's CSV references (with `--api all`, every HTA analysis fleetscope reproduces), with
HTA's defaults and every rank, and prints one JSON line: timings,
peak RSS after load and at the end. With `--out DIR` it also writes each result as CSV, in the
layout of `tests/data/traces/*/hta-0.5.0/` (that is how the edge-case references were made).

    /tmp/hta-venv/bin/python bench/hta_runner.py TRACE_DIR [--out DIR] [--reps N] [--api all]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import sys
import time
import warnings
from typing import Any


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _analyses(
    analyzer: Any, ranks: list[int], errors: dict[str, str], api: str, timings: dict[str, float]
) -> dict[str, Any]:
    """HTA's analyses, as `trace_analysis.py` names them: the nine the CSV references hold, and
    with `api == "all"` the rest of the API fleetscope's whole command answers too (`_rest`). One
    that raises (HTA raises on CPU-only traces) is recorded in `errors` and the others still run;
    `timings` gets each call's wall seconds."""
    calls: dict[str, Any] = {
        "temporal_breakdown": lambda: analyzer.get_temporal_breakdown(visualize=False),
        "idle_time": lambda: analyzer.get_idle_time_breakdown(
            ranks=ranks, visualize=False, show_idle_interval_stats=True
        ),
        "kernel_breakdown": lambda: analyzer.get_gpu_kernel_breakdown(visualize=False),
        "comm_comp_overlap": lambda: analyzer.get_comm_comp_overlap(visualize=False),
        "launch_stats": lambda: analyzer.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False),
        "queue_length_summary": lambda: analyzer.get_queue_length_summary(ranks=ranks),
        "blocked_on_full_queue": lambda: analyzer.get_time_spent_blocked_on_full_queue(
            analyzer.get_queue_length_time_series(ranks=ranks)
        ),
        "memory_bw_summary": lambda: analyzer.get_memory_bw_summary(ranks=ranks),
        "user_annotation": lambda: analyzer.get_gpu_user_annotation_breakdown(visualize=False),
    }
    if api == "all":
        calls.update(_rest(analyzer, ranks))
    out: dict[str, Any] = {}
    for name, call in calls.items():
        t0 = time.perf_counter()
        try:
            out[name] = call()
        except Exception as exc:
            errors[name] = f"{type(exc).__name__}: {str(exc)[:200]}"
            out[name] = None
        timings[name] = time.perf_counter() - t0
    return out


def _rest(analyzer: Any, ranks: list[int]) -> dict[str, Any]:
    """HTA's calls for the rest of what `fleetscope trace analyze` answers (its registry's
    `hta_api`), scoped as fleetscope's tables are, so both sides give the same answers: per rank
    where fleetscope has a row per rank (HTA's critical path, kernel sequences and ATen-op delays
    take one rank a call), the set for stragglers. The counter tracks are HTA's two time series,
    not `generate_trace_with_counters`, which computes the same series and also writes a trace
    file: the cheaper call, so HTA's side is not charged for I/O that fleetscope skips."""
    import tempfile

    import hta.analyzers.cuda_kernel_analysis as cka

    cka.CudaKernelAnalysis.visualize_aten_op_kernels_and_overhead = classmethod(  # no plot
        lambda *a, **k: None
    )

    def per_rank(call: Any) -> Any:
        return lambda: {rank: call(rank) for rank in ranks}

    def sequences(rank: int) -> Any:
        with tempfile.TemporaryDirectory() as tmp:
            return analyzer.get_frequent_cuda_kernel_sequences(
                "aten::", tmp, rank=rank, visualize=False
            )

    return {
        "critical_path": per_rank(lambda r: analyzer.critical_path_analysis(r, "ProfilerStep", 0)),
        "stragglers": lambda: analyzer.get_potential_stragglers(),
        "kernel_sequences": per_rank(sequences),
        "aten_op_kernels": lambda: analyzer.get_aten_op_kernels_and_delay(ranks=ranks),
        "counters": lambda: (
            analyzer.get_queue_length_time_series(ranks=ranks),
            analyzer.get_memory_bw_time_series(ranks=ranks),
        ),
        "cupti_counters": lambda: analyzer.get_cupti_counter_data_with_operators(ranks=ranks),
    }


def _write(results: dict[str, Any], out_dir: str) -> None:
    os.makedirs(out_dir, exist_ok=True)

    def csv(frame: Any, name: str, index: bool = False) -> None:
        if frame is not None:
            frame.to_csv(os.path.join(out_dir, name), index=index)

    csv(results["temporal_breakdown"], "temporal_breakdown.csv")
    if results["idle_time"] is not None:
        idle, stats = results["idle_time"]
        csv(idle, "idle_time_breakdown.csv")
        csv(stats, "idle_time_interval_stats.csv", index=True)
    if results["kernel_breakdown"] is not None:
        kernel_type, all_kernels = results["kernel_breakdown"]
        csv(kernel_type, "gpu_kernel_breakdown_kernel_type.csv")
        csv(all_kernels, "gpu_kernel_breakdown_all_kernels.csv")
    csv(results["comm_comp_overlap"], "comm_comp_overlap.csv")
    for rank, frame in (results["launch_stats"] or {}).items():
        csv(frame, f"cuda_kernel_launch_stats_rank{rank}.csv")
    for key in ("queue_length_summary", "memory_bw_summary"):
        if results[key] is not None:
            results[key] = results[key].reset_index()
    csv(results["queue_length_summary"], "queue_length_summary.csv")
    csv(results["blocked_on_full_queue"], "time_spent_blocked_on_full_queue.csv")
    csv(results["memory_bw_summary"], "memory_bw_summary.csv")
    csv(results["user_annotation"], "gpu_user_annotation_breakdown.csv")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace_dir")
    parser.add_argument("--out", default="")
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument(
        "--api", choices=("nine", "all"), default="nine",
        help="nine: the analyses the CSV references hold; all: also the rest of HTA's API that "
        "fleetscope's whole command answers (critical path, stragglers, kernel sequences, ATen-op "
        "delays, counters, CUPTI counters)",
    )  # fmt: skip
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.disable(logging.CRITICAL)
    t0 = time.perf_counter()
    from hta.trace_analysis import TraceAnalysis

    logging.disable(logging.CRITICAL)
    report: dict[str, Any] = {"import_s": time.perf_counter() - t0, "errors": {}}
    report["rss_after_import_mib"] = _rss_mib()
    load_s: list[float] = []
    analyses_s: list[float] = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        analyzer = TraceAnalysis(trace_dir=args.trace_dir)
        load_s.append(time.perf_counter() - t0)
        report["rss_after_load_mib"] = _rss_mib()
        ranks = analyzer.t.get_ranks()
        t0 = time.perf_counter()
        report["calls_s"] = {}
        results = _analyses(analyzer, ranks, report["errors"], args.api, report["calls_s"])
        analyses_s.append(time.perf_counter() - t0)
    report["load_s"] = load_s
    report["analyses_s"] = analyses_s
    report["rss_at_end_mib"] = _rss_mib()
    if args.out:
        _write(results, args.out)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
