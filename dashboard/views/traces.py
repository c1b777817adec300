"""Traces page: the profiler traces captured for the fleet's jobs, newest first, with each one's
job, time, duration, GPU activity and top finding (`dashboard.trace_list`); a row opens the
trace. Read-only."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import headline_tiles, headlines, state, tables, trace_list
from dashboard.headline_tiles import Tile
from dashboard.tables import Col

COLUMNS = {
    "trace_id": Col("trace"),
    "job_id": Col("job"),
    "captured_utc": Col("captured (UTC)"),
    "duration_ms": Col("duration ms", "%.1f"),
    "gpu": Col("GPU"),
    "top_finding": Col("top finding"),
}


def render() -> None:
    st.title("Traces")
    key = state.warehouse_key(state.settings())
    traces = state.traces(key)
    if traces.empty:
        st.info(
            "No trace captured yet. Open a job (Jobs page) and press **Request a profile**, or "
            "run `fleetscope profile JOB`; traces the analyzers capture by themselves "
            "(autoprofile) appear here too."
        )
        return
    rows = trace_list.with_summaries(traces, state.catalog_table(key, "traces"))
    rows["captured_utc"] = [_utc(t) for t in rows["captured_at"]]
    head = headlines.traces(rows)  # `fleetscope traces` prints the same numbers
    headline_tiles.show(
        [
            Tile("traces", str(head["traces"])),
            Tile("jobs profiled", str(head["jobs"])),
            Tile("with GPU kernels", str(head["with_gpu_kernels"])),
            Tile("analysed", str(head["analysed"])),
        ]
    )
    st.caption(
        "newest first · click a row to open the trace · duration: profiled steps x mean step · "
        "GPU busy: kernels' busy time over their span · top finding: the most GPU-h/week to give "
        "back (a projection: the what-if's saved share x the job's GPUs x 168 h)"
    )
    tables.listing(rows, COLUMNS, key="traces_table", page="views/trace.py", param="trace_id")


def _utc(moment: pd.Timestamp | None) -> str:
    stamp = pd.Timestamp(moment) if moment is not None else pd.NaT
    if pd.isna(stamp):
        return "-"
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return f"{stamp:%Y-%m-%d %H:%M}"


if __name__ == "__main__":
    render()
