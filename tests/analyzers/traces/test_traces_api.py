"""The public surface: the entry points of `analyzers.traces.api` (the package itself defines no
names) and the analysis registry."""

from __future__ import annotations

import types

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
    assert len(registry) == len(plugins.registered(plugins.TRACE_ANALYSES)) == 23
    # The report order of the entry points' PLUGIN_ORDER (setuptools sorts them by name).
    assert list(registry) == [
        "temporal_breakdown", "idle_time", "kernel_breakdown", "comm_comp_overlap",
        "launch_stats", "queue_length", "memory_bw", "user_annotation", "steps", "dataloader",
        "sync", "pageable_memcpy", "gpu_gaps", "low_util", "tensor_cores", "top_kernels",
        "critical_path", "whatif", "stragglers", "kernel_sequences", "aten_op_kernels", "counters",
        "cupti_counters",
    ]  # fmt: skip
    hta = {n for n, spec in registry.items() if spec.hta_api}
    assert hta == {
        "temporal_breakdown", "idle_time", "kernel_breakdown", "comm_comp_overlap",
        "launch_stats", "queue_length", "memory_bw", "user_annotation", "critical_path",
        "stragglers", "kernel_sequences", "aten_op_kernels", "counters", "cupti_counters",
    }  # fmt: skip
