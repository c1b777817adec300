"""Issue 31's page changes on the test warehouse: the Traces list says what each trace holds, the
Sharing page explains an empty plan, the sidebar defines the words, and the heatmap tells idle
allocated GPUs from unallocated ones."""

from __future__ import annotations

import pandas as pd

from dashboard import heat, trace_list
from tests.dashboard.conftest import Warehouse
from tests.dashboard.test_dashboard_pages import _app


def test_traces_list_shows_job_time_duration_gpu_and_top_finding(
    warehouse_env: Warehouse,
) -> None:
    app = _app("views/traces.py")
    row = app.dataframe[0].value.iloc[0]
    assert (row["trace_id"], row["job_id"]) == ("stall-1/mi250", "stall-1")
    # a file dropped in the folder, never analysed by the server: nothing claimed about it
    assert (row["gpu"], row["top_finding"]) == ("-", "-")
    assert row["captured_utc"].count(":") == 1  # "2026-11-28 19:49", minutes in UTC


def test_trace_rows_from_a_stored_summary() -> None:
    summary = {
        "headline": {"0": {"steps": 6, "mean_step_ms": 174.8, "dataloader_share": 0.4}},
        "per_rank": {"temporal_breakdown": {"0": {"gpu_busy_us": 600.0, "kernel_time_us": 1e3}}},
        "findings": [
            {"rule_id": "T1", "wasted_gpu_hours": 0.0},
            {"rule_id": "T8", "wasted_gpu_hours": 56.9},
        ],
    }
    cpu_only = {"headline": {"0": {"steps": 5, "mean_step_ms": 104.6}}, "findings": []}
    stored = pd.DataFrame(
        {"trace_id": ["gpu", "cpu"], "host": ["h1", "h2"], "summary": [summary, cpu_only]}
    )
    listed = pd.DataFrame({"trace_id": ["gpu", "cpu", "dropped"]})
    rows = trace_list.with_summaries(listed, stored)
    assert rows["duration_ms"].round(1).tolist()[:2] == [1048.8, 523.0]
    assert rows["gpu"].tolist() == ["GPU busy 60 %", "no GPU kernels", "-"]
    assert rows["top_finding"].tolist() == [
        "T8 Data loader in the trace · 56.9 GPU-h/week", "none", "-",
    ]  # fmt: skip


def test_an_empty_sharing_plan_says_why(warehouse_env: Warehouse) -> None:
    app = _app("views/sharing.py")
    assert "No co-location proposed over the last 7 days" in app.info[0].value
    assert "at least 6 h of the window" in app.info[0].value
    # the reasons as `fleetscope plan sharing` words them ("too short: 5"), each with what to do,
    # as wrapping text: no table cell to cut the sentence off in
    assert not app.dataframe
    (why,) = [m.value for m in app.main.markdown if m.value.startswith("- **")]
    assert why.startswith("- **too short: 5** — held under the minimum")
    assert "a longer window (sidebar) counts more of a long-running job" in why


def test_the_sidebar_defines_allocated_active_and_recoverable(warehouse_env: Warehouse) -> None:
    app = _app()
    (glossary,) = [e for e in app.sidebar.expander if e.label == "Words used here"]
    text = glossary.markdown[0].value
    for word in ("allocated GPU-hours", "active GPU-hours", "recoverable GPU-hours", "GPU-h/week"):
        assert f"**{word}**" in text


def test_heatmap_cells_tell_idle_allocated_from_unallocated() -> None:
    bucket = pd.Timestamp("2026-11-16 08:00", tz="UTC")
    buckets = pd.DataFrame(
        {
            "bucket": bucket,
            "cluster": "east",
            "host": ["h1", "h1", "h2"],
            "gpu_index": [0, 1, 0],
            "job_id": ["idle-job", None, None],
            "gpu_h": [1.0, 1.0, 1.0],
            "known_h": [1.0, 1.0, 1.0],
            "active_h": [0.0, 0.0, 0.0],
        }
    )
    cells = heat.host_cells(buckets).set_index("host")
    assert cells.loc["h1", "state"] == "allocated"  # a job holds a GPU at 0 %: dark, not grey
    assert cells.loc["h1", "active_pct"] == 0.0
    assert cells.loc["h1", "allocated_pct"] == 50.0
    assert cells.loc["h2", "state"] == "unallocated"
    assert cells["active_pct"].isna().tolist() == [False, True]
