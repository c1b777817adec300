"""Jobs page: every job in the window with its efficiency summary and findings, searchable.

A row's job id opens the job page. Read-only.
"""

from __future__ import annotations

import streamlit as st

from dashboard import data, state, tables
from dashboard.tables import Col

LINKS = 20
COLUMNS = {
    "job_id": Col("job"),
    "user": Col("user"),
    "team": Col("team"),
    "gpus": Col("GPUs", "%d"),
    "allocated_h": Col("GPU-h", "%.2f"),
    "active_pct": Col("active %", "%.1f"),
    "sm_active_pct": Col("SM %", "%.1f"),
    "idle_h": Col("idle GPU-h", "%.2f"),
    "findings": Col("findings", "%d"),
    "wasted_gpu_h": Col("recoverable GPU-h", "%.2f"),
}


def render() -> None:
    st.title("Jobs")
    key = state.warehouse_key(state.settings())
    win = state.window(key, state.window_picker())
    if win is None:
        st.info(state.no_samples(key))
        return
    state.show_missing(key, win)
    jobs = data.job_efficiency(state.buckets_for(key, win), state.jobs_meta(key))
    jobs = data.with_findings(jobs, state.job_findings(key, win.start, win.end))
    search = st.text_input("Search job id, user, team or name", key="job_search")
    shown = data.search_jobs(jobs, search)
    st.caption(
        f"{len(shown)} of {len(jobs)} jobs, idlest first · GPU-h: allocated GPU-hours · "
        "SM %: SM-active % · recoverable: what the findings' fixes would return"
    )
    event = tables.show(
        shown,
        COLUMNS,
        on_select="rerun",
        selection_mode="single-row",
        key="jobs_table",
    )
    rows = event.selection.rows if event is not None else []
    if rows:
        job_id = str(shown.iloc[rows[0]]["job_id"])
        st.switch_page("views/job.py", query_params={"job_id": job_id})
    links = st.columns(3)
    for number, job_id in enumerate(shown["job_id"].head(LINKS)):
        links[number % 3].page_link(
            "views/job.py", label=f"job {job_id}", query_params={"job_id": job_id}
        )


if __name__ == "__main__":
    render()
