"""Write HTA 0.5.0's answers for the rest of its API next to each shared trace (the goldens that
tests/analyzers/traces/test_hta_api_agreement.py compares with).

Runs inside HTA's own virtual environment (HTA 0.5.0 with pandas 2.3; never in CI, which has no
HTA), imports nothing from fleetscope, and writes small JSON/CSV files into
`TRACE_DIR/hta-0.5.0/`:

- `critical_path.json`: `critical_path_analysis(rank, "ProfilerStep", 0)` per rank: success, graph
  size, path length (the sum of the networkx edge weights on `dag_longest_path`, after HTA's
  validation zeroed weights <= -1) and `summary()`'s sums per `bound_by`, or the exception.

    python3 -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install holistictraceanalysis==0.5.0 'pandas==2.3.*'
    /tmp/hta-venv/bin/python bench/hta_api_goldens.py tests/data/traces/*/
    /tmp/hta-venv/bin/python bench/hta_api_goldens.py --diff tests/data/traces
    /tmp/hta-venv/bin/python bench/hta_api_goldens.py --stragglers tests/data/traces
    /tmp/hta-venv/bin/python bench/hta_api_goldens.py --counters-ties tests/data/traces/*/

HTA's counter tracks depend on the order numpy's unstable quicksort gives events at one
timestamp, and that order differs between CPUs (numpy dispatches its sorts to AVX-512 or AVX2
kernels): the same HTA 0.5.0 and numpy gave Queue Length sums 4-28 apart on two machines.
`counters.json` is the recording of the first machine; `--counters-ties` writes
`counters.ties-<fingerprint>.json` with this machine's (`quicksort_ties`), which the tests
compare with wherever the fingerprint matches.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import sys
import warnings
from pathlib import Path
from typing import Any


def critical_path(analyzer: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"annotation": "ProfilerStep", "instance_id": 0, "ranks": {}}
    for rank in sorted(analyzer.t.traces):
        entry: dict[str, Any] = {}
        try:
            result = analyzer.critical_path_analysis(rank, "ProfilerStep", 0)
        except Exception as exc:  # HTA asserts on 2021-format traces; the golden records it
            entry["error"] = f"{type(exc).__name__}: {exc}"
            out["ranks"][str(rank)] = entry
            continue
        if result is None:
            entry["error"] = "no ProfilerStep annotation"
            out["ranks"][str(rank)] = entry
            continue
        graph, ok = result
        entry.update(ok=bool(ok), nodes=graph.number_of_nodes(), edges=graph.number_of_edges())
        if ok:
            path = graph.critical_path_nodes
            entry["length_us"] = float(
                sum(graph.edges[u, v]["weight"] for u, v in itertools.pairwise(path))
            )
            entry["path_edges"] = len(path) - 1
            edges = graph.get_critical_path_breakdown()
            sums = edges.groupby("bound_by").duration.sum()
            entry["bound_by_us"] = {str(k): float(v) for k, v in sums.items() if k}
            counts = edges.groupby("type").duration.count()
            entry["edge_types"] = {str(k): int(v) for k, v in counts.items()}
        out["ranks"][str(rank)] = entry
    return out


def kernel_sequences(analyzer: Any) -> dict[str, Any]:
    """`get_frequent_cuda_kernel_sequences(op, tmp)` with its defaults, per operator."""
    import tempfile

    out: dict[str, Any] = {}
    for op in SEQUENCE_OPERATORS:
        try:
            with tempfile.TemporaryDirectory() as tmp:
                table = analyzer.get_frequent_cuda_kernel_sequences(op, tmp, visualize=False)
            out[op] = table.drop(columns=["pattern_indices"], errors="ignore").to_dict("records")
        except Exception as exc:  # HTA 0.5.0's call stacks raise on most real traces
            out[op] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    return out


def aten_op_kernels(analyzer: Any) -> dict[str, Any]:
    """`get_aten_op_kernels_and_delay(ranks=[first rank])` (its plot switched off)."""
    import hta.analyzers.cuda_kernel_analysis as cka

    cka.CudaKernelAnalysis.visualize_aten_op_kernels_and_overhead = classmethod(  # type: ignore[method-assign]
        lambda *a, **k: None
    )
    rank = sorted(analyzer.t.traces)[0]
    try:
        table = analyzer.get_aten_op_kernels_and_delay(ranks=[rank])[rank]
    except Exception as exc:  # HIP traces: no launch matches, then a KeyError
        return {"rank": rank, "error": f"{type(exc).__name__}: {exc}"}
    return {"rank": rank, "rows": table.to_dict("records")}


def quicksort_ties() -> str:
    """A fingerprint of how numpy's quicksort orders ties on this machine (int64 and float64
    keys with many ties, argsorted): two machines with one fingerprint order HTA's events alike."""
    import hashlib

    import numpy as np

    keys = np.random.default_rng(0).integers(0, 64, 20_000)
    digest = hashlib.sha256()
    for dtype in (np.int64, np.float64):
        digest.update(np.argsort(keys.astype(dtype), kind="quicksort").astype(np.int64).tobytes())
    return digest.hexdigest()[:12]


def counters(analyzer: Any) -> dict[str, Any]:
    """`generate_trace_with_counters(ranks=[first rank])` on a copy of the trace; the counter
    events it appended, summarised per track (they are too many to commit): events, sum and
    last value, first and last ts."""
    import glob
    import gzip
    import shutil
    import tempfile

    from hta.trace_analysis import TraceAnalysis

    rank = sorted(analyzer.t.traces)[0]
    source = os.path.dirname(analyzer.t.trace_files[rank])
    with tempfile.TemporaryDirectory() as tmp:
        for f in os.listdir(source):
            if f.endswith((".json", ".gz")):
                shutil.copy(os.path.join(source, f), tmp)
        try:
            TraceAnalysis(trace_dir=tmp).generate_trace_with_counters(ranks=[rank])
        except Exception as exc:
            return {"rank": rank, "error": f"{type(exc).__name__}: {exc}"}
        (written,) = glob.glob(os.path.join(tmp, "*_with_counters*"))
        with gzip.open(written, "rt") as f:
            events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "C"]
    tracks: dict[str, dict[str, Any]] = {}
    for e in events:
        ((counter, value),) = e["args"].items()
        key = f"{counter}|{e.get('id', e['name'])}"
        t = tracks.setdefault(key, {"events": 0, "sum": 0.0, "first_ts": e["ts"]})
        t["events"] += 1
        t["sum"] += float(value)
        t["last"] = float(value)
        t["last_ts"] = e["ts"]
        t["pid"] = e["pid"]
    for t in tracks.values():
        t["sum"] = round(t["sum"], 3)
        t["last"] = round(t["last"], 6)
    return {"rank": rank, "tracks": tracks}


SEQUENCE_OPERATORS = ("aten::linear", "aten::conv2d", "aten::batch_norm", "aten::add_")
CALLS = {
    "critical_path.json": critical_path,
    "kernel_sequences.json": kernel_sequences,
    "aten_op_kernels.json": aten_op_kernels,
    "counters.json": counters,
}
# TraceDiff pairs (control, test): before/after a change (the ResNet-50 pair), two models, and a
# trace against itself. Written into the control's folder as trace_diff_<test>.csv/.json.
DIFF_PAIRS = (
    ("kineto_resnet50_nw0", "kineto_resnet50_nw4"),
    ("hta_trace_diff_control_rank3", "hta_ns_resolution_rank0"),
    ("hta_ns_resolution_rank0", "hta_ns_resolution_rank0"),
)


def trace_diff(root: str) -> None:
    """`TraceDiff.compare_traces` and `ops_diff` with their defaults (first rank, first
    iteration, CPU and GPU); written as JSON."""
    from hta.trace_diff import TraceDiff

    for control, test in DIFF_PAIRS:
        a, b = os.path.join(root, control), os.path.join(root, test)
        table = TraceDiff.compare_traces(a, b).reset_index(names="name")
        out = os.path.join(a, "hta-0.5.0", f"trace_diff_{test}.json")
        data = {"compare_traces": table.to_dict("records"), "ops_diff": TraceDiff.ops_diff(a, b)}
        with open(out, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.write("\n")
        print(control, test, "diff done", file=sys.stderr)


def stragglers(root: str) -> None:
    """`get_potential_stragglers()` (defaults) on the 3-rank set built from the NCCL trace
    (tests/analyzers/traces/straggler_set.py), with HTA's straggler counts per rank."""
    import tempfile

    from hta.analyzers.straggler import find_stragglers_with_late_start_comm_kernels
    from hta.trace_analysis import TraceAnalysis

    sys.path.insert(
        0, os.path.join(os.path.dirname(__file__), "..", "tests", "analyzers", "traces")
    )
    import straggler_set

    counts: dict[str, int] = {}

    def keep_counts(*args: Any, **kwargs: Any) -> Any:
        series = find_stragglers_with_late_start_comm_kernels(*args, **kwargs)
        counts.update({str(k): int(v) for k, v in series.items()})
        return series

    with tempfile.TemporaryDirectory() as tmp:
        analyzer = TraceAnalysis(trace_dir=str(straggler_set.build(Path(tmp))))
        found = analyzer.get_potential_stragglers(straggler_identification_impl=keep_counts)
    out = os.path.join(root, "hta_nccl_data_rank0", "hta-0.5.0", "stragglers_3_ranks.json")
    with open(out, "w") as f:
        json.dump({"stragglers": [int(r) for r in found], "counts": counts}, f, indent=1)
        f.write("\n")


def main(dirs: list[str]) -> None:
    warnings.filterwarnings("ignore")
    logging.disable(logging.CRITICAL)
    from hta.trace_analysis import TraceAnalysis

    if dirs[:1] == ["--diff"]:
        trace_diff(dirs[1])
        return
    if dirs[:1] == ["--stragglers"]:
        stragglers(dirs[1])
        return
    calls = CALLS
    if dirs[:1] == ["--counters-ties"]:
        dirs, calls = dirs[1:], {f"counters.ties-{quicksort_ties()}.json": counters}

    for trace_dir in dirs:
        analyzer = TraceAnalysis(trace_dir=trace_dir)
        out_dir = os.path.join(trace_dir, "hta-0.5.0")
        os.makedirs(out_dir, exist_ok=True)
        for name, call in calls.items():
            with open(os.path.join(out_dir, name), "w") as f:
                json.dump(call(analyzer), f, indent=1, sort_keys=True)
                f.write("\n")
        print(trace_dir, "done", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
