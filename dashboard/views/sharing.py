"""Sharing page: `fleetscope plan sharing` for the window: co-locations of under-used GPUs (MIG,
MPS, time-slicing), the GPUs they free and each job's expected slowdown. Read-only: it plans,
it never changes a GPU (method: docs/sharing.md)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import state


def render() -> None:
    st.title("GPU sharing")
    key = state.warehouse_key(state.settings())
    label = state.window_picker()
    win = state.window(key, label)
    if win is None:
        st.info(state.no_samples(key))
        return
    state.show_missing(key, win)
    plan = state.sharing_plan(key, win.start, win.end)
    cols = st.columns(3)
    cols[0].metric("GPUs freed", str(plan["gpus_freed"]))
    cols[1].metric("GPU-h per week", f"{plan['freed_gpu_hours_per_week']:.0f}")
    cols[2].metric("Co-locations", str(len(plan["groups"])))
    rows = pd.DataFrame(plan["rows"])
    if rows.empty:
        st.info(
            f"No co-location proposed over {label}: {plan['candidates']} under-used GPU(s) found."
        )
        return
    st.caption(
        "Each group shares one GPU; slowdowns are expected (means) and at risk (95th "
        "percentiles). Constraints and sources: docs/sharing.md."
    )
    st.dataframe(
        rows,
        hide_index=True,
        width="stretch",
        column_config={
            "sm_mean_pct": st.column_config.NumberColumn("SM mean %", format="%.0f"),
            "memory_peak_gib": st.column_config.NumberColumn("memory GiB", format="%.1f"),
            "expected_slowdown_pct": st.column_config.NumberColumn("slowdown %", format="%.0f"),
            "risk_slowdown_pct": st.column_config.NumberColumn("at risk %", format="%.0f"),
        },
    )
    for n, group in enumerate(plan["groups"], 1):
        with st.expander(f"#{n} {group['mechanism']} on {group['gpu']}: constraints"):
            for line in group["constraints"]:
                st.markdown(f"- {line}")


if __name__ == "__main__":
    render()
