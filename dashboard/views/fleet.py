"""Fleet page: where the fleet's GPU-hours went in a window, and which jobs wasted the most.

Every number comes from one cached scan of the warehouse (`data.gpu_buckets`); opportunities are
`analyzers.reports.ranking` over the findings the analyzers stored (`dashboard.opportunities`). Read-only.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, data, state

IDLEST_JOBS = 15
JOB_LINES = 8


def _fmt_h(hours: float) -> str:
    return f"{hours:,.0f} GPU-h" if hours >= 1000 else f"{hours:,.2f} GPU-h"


def render() -> None:
    st.title("Fleet")
    current = state.settings()
    key = state.warehouse_key(current)
    label = state.window_picker()
    win = state.window(key, label)
    if win is None:
        st.info("The warehouse holds no GPU samples yet: start agents (or `fleetscope demo`).")
        return
    buckets = state.buckets_for(key, win)
    totals = data.fleet_totals(buckets)
    st.caption(
        f"{win.start:%Y-%m-%d %H:%M} to {win.end:%Y-%m-%d %H:%M} UTC · {totals.gpus} GPUs · "
        f"{totals.jobs} jobs · buckets of {win.bucket_s // 60} min"
    )
    cols = st.columns(5)
    cols[0].metric("Allocated", _fmt_h(totals.allocated_h))
    cols[1].metric(
        "Active",
        _fmt_h(totals.active_h),
        f"{totals.active_pct:.1f} % of allocated",
        delta_color="off",
    )
    if totals.sm_h is None:
        cols[2].metric("SM-active", "n/a", "enable DCGM_FI_PROF_SM_ACTIVE", delta_color="off")
    else:
        sm_pct = 100.0 * totals.sm_h / totals.sm_known_h
        cols[2].metric("SM-active", _fmt_h(totals.sm_h), f"{sm_pct:.1f} %", delta_color="off")
    cols[3].metric("Idle while allocated", _fmt_h(totals.idle_h))
    cols[4].metric("Capacity seen", _fmt_h(totals.capacity_h))

    st.subheader("GPU-hours: allocated vs active vs SM-active")
    st.altair_chart(charts.gpu_hours(data.gpu_hours_over_time(buckets)), width="stretch")

    left, right = st.columns(2)
    with left:
        st.subheader("Utilization by cluster")
        by_cluster = data.utilization_by(buckets, "cluster")
        st.altair_chart(
            charts.utilization_lines(by_cluster, "cluster", "active % of allocated"),
            width="stretch",
        )
    jobs = data.job_efficiency(buckets, state.jobs_meta(key))
    with right:
        st.subheader(f"Utilization of the {JOB_LINES} largest jobs")
        largest = jobs.nlargest(JOB_LINES, "allocated_h")["job_id"]
        by_job = data.utilization_by(buckets[buckets["job_id"].isin(largest)], "job_id")
        st.altair_chart(charts.utilization_lines(by_job, "job_id", "active %"), width="stretch")

    st.subheader("Utilization heatmap by cluster and host")
    st.altair_chart(charts.heatmap(data.host_heatmap(buckets)), width="stretch")

    left, right = st.columns([1, 2])
    with left:
        st.subheader("Percentiles")
        percentiles = state.sketch_percentiles(key, win.start, win.end, win.bucket_s)
        caption = "of every sample's active % on allocated GPUs (quantile sketches, within 1 %)"
        if percentiles is None:  # no sketches kept yet: the bucket-mean approximation
            percentiles = data.utilization_percentiles(buckets)
            caption = "of per-GPU active % per bucket, weighted by GPU-hours"
        percentiles["quantile"] = [f"p{q * 100:g}" for q in percentiles["quantile"]]
        st.dataframe(percentiles, hide_index=True, width="stretch")
        st.caption(caption)
    with right:
        _opportunities(key, win)

    st.subheader("Idlest jobs")
    st.caption("ranked by idle GPU-hours: allocated hours minus active hours")
    _idlest(jobs)


def _opportunities(key: str, win: data.Window) -> None:
    st.subheader("Opportunities")
    found = state.opportunity_tables(key, win.start, win.end)
    if found.by_rule.empty:
        st.caption("No findings stored for this window yet (the analyzers write them).")
        return
    st.caption(
        f"{found.total_gpu_h:,.1f} recoverable GPU-h (a job flagged by several rules counted "
        f"once; previous window {found.previous_total_gpu_h:,.1f}), as `fleetscope opportunities`"
    )
    trend = {
        "wasted_gpu_h": st.column_config.NumberColumn("recoverable GPU-h", format="%.1f"),
        "previous_gpu_h": st.column_config.NumberColumn("previous window", format="%.1f"),
        "change_pct": st.column_config.NumberColumn("trend %", format="%+.0f"),
    }
    st.dataframe(found.by_rule, hide_index=True, width="stretch", column_config=trend)
    st.dataframe(
        found.by_team,
        hide_index=True,
        width="stretch",
        column_config={**trend, "top_rule": st.column_config.TextColumn("top rule")},
    )


def _idlest(jobs: pd.DataFrame) -> None:
    top = jobs.head(IDLEST_JOBS)
    shown = top[
        [
            "job_id",
            "user",
            "team",
            "name",
            "gpus",
            "allocated_h",
            "active_h",
            "idle_h",
            "active_pct",
        ]
    ]
    st.dataframe(
        shown,
        hide_index=True,
        width="stretch",
        column_config={
            "allocated_h": st.column_config.NumberColumn("allocated GPU-h", format="%.2f"),
            "active_h": st.column_config.NumberColumn("active GPU-h", format="%.2f"),
            "idle_h": st.column_config.NumberColumn("idle GPU-h", format="%.2f"),
            "active_pct": st.column_config.NumberColumn("active %", format="%.1f"),
        },
    )
    links = st.columns(5)
    for number, job_id in enumerate(top["job_id"]):
        links[number % 5].page_link(
            "views/job.py", label=f"job {job_id}", query_params={"job_id": job_id}
        )


if __name__ == "__main__":
    render()
