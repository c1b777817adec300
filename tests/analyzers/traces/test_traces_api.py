"""The public surface: `__all__`, the analysis registry, and the Arrow tables for storage."""

from __future__ import annotations

import types

import pyarrow as pa

import analyzers.traces as traces
from analyzers.traces.analyses import load_registry
from analyzers.traces.arrow import to_arrow_tables
from fleetscope import plugins
from tests.analyzers.traces.trace_paths import DATA


def test_public_api_is_exactly_all() -> None:
    public = {
        n for n in dir(traces)
        if not n.startswith("_") and not isinstance(getattr(traces, n), types.ModuleType)
    }  # fmt: skip
    assert public == set(traces.__all__)


def test_registry_has_one_analysis_per_module_in_report_order() -> None:
    registry = load_registry()
    assert len(registry) == len(plugins.registered(plugins.TRACE_ANALYSES)) == 17
    # The report order of the entry points' PLUGIN_ORDER (setuptools sorts them by name).
    assert list(registry) == [
        "temporal_breakdown", "idle_time", "kernel_breakdown", "comm_comp_overlap",
        "launch_stats", "queue_length", "memory_bw", "user_annotation", "steps", "dataloader",
        "sync", "pageable_memcpy", "gpu_gaps", "low_util", "tensor_cores", "top_kernels", "whatif",
    ]  # fmt: skip
    hta = {n for n, spec in registry.items() if spec.hta_api}
    assert hta == {
        "temporal_breakdown", "idle_time", "kernel_breakdown", "comm_comp_overlap",
        "launch_stats", "queue_length", "memory_bw", "user_annotation",
    }  # fmt: skip


def test_arrow_tables_hold_every_kept_event() -> None:
    trace = traces.load_trace_set(DATA / "hta_nccl_data_rank0")
    tables = to_arrow_tables(trace)
    events, kernels = tables["trace_events"], tables["trace_kernels"]
    assert events.num_rows == 26932 and kernels.num_rows == 3774
    assert events.schema.field("ts_us").type == pa.float64()
    assert set(kernels.column("kernel_class").to_pylist()) == {
        "COMPUTATION",
        "COMMUNICATION",
        "MEMORY",
    }
    first = events.slice(0, 1).to_pylist()[0]
    assert first["cat"] == "cpu_op" and first["event_index"] == 0
