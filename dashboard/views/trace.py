"""Trace page: one trace's GPU time breakdown, kernels per stream with idle gaps, top kernels,
what-if estimates, and a link that opens it in Perfetto UI. Read-only."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from dashboard import charts, kineto, state
from fleetscope.errors import TraceError

PERFETTO_UI = "https://ui.perfetto.dev/"
TIMELINE_OPS = 5000  # most ops drawn; the busiest window of the trace is shown past that


@st.cache_data(show_spinner=False, max_entries=8)
def _ops(path: str, mtime_ns: int) -> pd.DataFrame:
    return kineto.gpu_ops(kineto.read_events(Path(path)))


def render() -> None:
    key = state.warehouse_key(state.settings())
    traces = state.traces(key)
    trace_id = st.query_params.get("trace_id", "")
    if not trace_id:
        st.title("Trace")
        choice = st.selectbox("Trace", traces["trace_id"].tolist(), index=None)
        if choice:
            st.query_params["trace_id"] = choice
            st.rerun()
        return
    st.title(f"Trace {trace_id}")
    match = traces[traces["trace_id"] == trace_id]
    if match.empty:
        st.error(f"No trace {trace_id!r} is known.")
        return
    record = match.iloc[0]
    path = Path(str(record["path"]))
    if record["job_id"]:
        st.page_link(
            "views/job.py",
            label=f"job {record['job_id']}",
            query_params={"job_id": str(record["job_id"])},
        )
    try:
        ops = _ops(str(path), path.stat().st_mtime_ns)
    except (OSError, TraceError) as exc:
        st.error(f"Cannot read this trace: {exc}")
        return
    st.link_button("Open in Perfetto UI", PERFETTO_UI, icon=":material/open_in_new:")
    st.caption(f"Perfetto opens local files: download {path.name} and drop it on the page.")
    st.download_button("Download trace", path.read_bytes(), file_name=path.name)
    if ops.empty:
        st.info("This trace holds no GPU kernels (a CPU-only trace).")
        return
    breakdown = kineto.temporal_breakdown(ops)
    cols = st.columns(4)
    cols[0].metric("GPU busy span", f"{breakdown.kernel_time_us / 1000:,.1f} ms")
    cols[1].metric("idle", f"{100 * breakdown.idle_time_us / breakdown.kernel_time_us:.1f} %")
    cols[2].metric("compute", f"{100 * breakdown.compute_time_us / breakdown.kernel_time_us:.1f} %")
    cols[3].metric("GPU ops", f"{len(ops):,}")

    left, right = st.columns(2)
    with left:
        st.subheader("Time breakdown")
        frame = breakdown.as_frame()
        st.altair_chart(charts.bars(frame, "time_ms", "category", "ms"), width="stretch")
    with right:
        st.subheader("What if")
        st.dataframe(
            kineto.what_if(breakdown),
            hide_index=True,
            width="stretch",
            column_config={"speedup": st.column_config.NumberColumn(format="%.2fx")},
        )
    st.subheader("GPU timeline: kernels per stream")
    shown = ops.head(TIMELINE_OPS).assign(
        start_ms=lambda f: f["start_us"] / 1000, end_ms=lambda f: f["end_us"] / 1000
    )
    if len(ops) > TIMELINE_OPS:
        st.caption(f"first {TIMELINE_OPS:,} of {len(ops):,} ops; blank space is GPU idle time")
    st.altair_chart(charts.timeline(shown), width="stretch")
    st.dataframe(kineto.stream_gaps(ops), hide_index=True, width="stretch")
    st.subheader("Top kernels")
    st.dataframe(
        kineto.top_kernels(ops),
        hide_index=True,
        width="stretch",
        column_config={"share_pct": st.column_config.NumberColumn("share %", format="%.1f")},
    )


if __name__ == "__main__":
    render()
