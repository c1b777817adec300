"""The public surface: the entry points of `analyzers.traces.api` (the package itself defines no
names) and the analysis registry."""

from __future__ import annotations

import json
import math
import types
from pathlib import Path

import analyzers.traces as traces
from analyzers.traces import api
from analyzers.traces.analyses import load_registry
from fleetscope import plugins


def test_the_entry_points_live_in_api_and_the_package_defines_no_names() -> None:
    public = {
        n for n in dir(traces)
        if not n.startswith("_") and not isinstance(getattr(traces, n), types.ModuleType)
    }  # fmt: skip
    assert public == set()
    assert set(api.__all__) == {
        "TraceReport", "analyze_trace", "find_trace_files", "load_trace_set", "run_analyses",
        "selected_analyses",
    }  # fmt: skip
    assert all(callable(getattr(api, name)) for name in api.__all__)


def test_registry_has_one_analysis_per_module_in_report_order() -> None:
    registry = load_registry()
    assert len(registry) == len(plugins.registered(plugins.TRACE_ANALYSES)) == 24
    # The report order of the entry points' PLUGIN_ORDER (setuptools sorts them by name).
    assert list(registry) == [
        "temporal_breakdown", "idle_time", "kernel_breakdown", "comm_comp_overlap",
        "launch_stats", "queue_length", "memory_bw", "user_annotation", "steps", "dataloader",
        "sync", "pageable_memcpy", "gpu_gaps", "low_util", "tensor_cores", "sm_efficiency",
        "top_kernels", "critical_path", "whatif", "stragglers", "kernel_sequences",
        "aten_op_kernels", "counters", "cupti_counters",
    ]  # fmt: skip
    hta = {n for n, spec in registry.items() if spec.hta_api}
    assert hta == {
        "temporal_breakdown", "idle_time", "kernel_breakdown", "comm_comp_overlap",
        "launch_stats", "queue_length", "memory_bw", "user_annotation", "critical_path",
        "stragglers", "kernel_sequences", "aten_op_kernels", "counters", "cupti_counters",
    }  # fmt: skip


def test_a_rank_of_gpu_rows_only_runs_every_analysis(tmp_path: Path) -> None:
    # The data-loader share fell back to the CPU rows' span and took the min of none: the
    # whole command ended in a ValueError traceback on such a rank.
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "args": {"stream": 7}}
    events = [{**kernel, "ts": 0, "dur": 5}, {**kernel, "ts": 10, "dur": 5}]
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": events}))
    for hta_compatible in (False, True):
        report = api.analyze_trace(tmp_path / "t.json", hta_compatible=hta_compatible)
        assert list(report.results) == list(load_registry())
        loader = report.results["dataloader"].per_rank[0]
        assert (loader["step_us"], loader["calls"], math.isnan(loader["share"])) == (0, 0, True)
