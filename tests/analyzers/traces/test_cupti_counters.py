"""CUPTI counters (HTA 0.5.0 `get_cupti_counter_data_with_operators`): no shared trace was
recorded in CUPTI profiler mode, HTA returns nothing for each, and the report says so per rank."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzers.traces.api import run_analyses
from tests.analyzers.traces.trace_paths import MAIN_TRACES, trace_set


@pytest.mark.parametrize("trace_dir", MAIN_TRACES, ids=lambda p: p.name)
def test_a_trace_without_counters_says_so(trace_dir: Path) -> None:
    trace = trace_set(trace_dir, hta_compatible=True)
    result = run_analyses(trace, names=["cupti_counters"])["cupti_counters"]
    assert result.table("cupti_counters").rows == ()
    assert result.notes == tuple(
        f"rank {rank}: no CUPTI counters (no cuda_profiler_range events: the trace was not "
        "recorded in CUPTI profiler mode)"
        for rank in sorted(trace.ranks)
    )
