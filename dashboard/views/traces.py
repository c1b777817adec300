"""Traces page: the profiler traces captured for the fleet's jobs, newest first. Read-only."""

from __future__ import annotations

import streamlit as st

from dashboard import state


def render() -> None:
    st.title("Traces")
    key = state.warehouse_key(state.settings())
    traces = state.traces(key)
    if traces.empty:
        st.info("No trace captured yet: request a profile from a job's page.")
        return
    st.dataframe(
        traces[["trace_id", "job_id", "captured_at", "size_mib"]],
        hide_index=True,
        width="stretch",
        column_config={"size_mib": st.column_config.NumberColumn("MiB", format="%.2f")},
    )
    links = st.columns(3)
    for number, trace_id in enumerate(traces["trace_id"]):
        links[number % 3].page_link(
            "views/trace.py", label=f"trace {trace_id}", query_params={"trace_id": trace_id}
        )


if __name__ == "__main__":
    render()
