"""Jobs page: every job in the window with its efficiency summary and findings, searchable.

A row opens its job's page. Read-only.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import data, headline_tiles, state, tables, time_range
from dashboard.headline_tiles import Tile
from dashboard.tables import Col

COLUMNS = {
    "job_id": Col("job"),
    "user": Col("user"),
    "team": Col("team"),
    "gpus": Col("GPUs", "%d"),
    "allocated_h": Col("allocated GPU-h", "%.2f"),
    "active_pct": Col("active %", "%.1f"),
    "idle_h": Col("idle GPU-h", "%.2f"),
    "findings": Col("findings", "%d"),
    "wasted_gpu_h": Col("recoverable GPU-h", "%.2f"),
}


def render() -> None:
    st.title("Jobs")
    key = state.warehouse_key(state.settings())
    win = state.window(key, time_range.window_picker())
    if win is None:
        st.info(state.no_samples(key))
        return
    state.show_missing(key, win)
    jobs = state.jobs_for(key, win)
    jobs = data.with_findings(jobs, state.job_findings(key, win.start, win.end))
    _headline(jobs)
    search = st.text_input("Search job id, user, team or name", key="job_search")
    shown = data.search_jobs(jobs, search)
    st.caption(
        f"{len(shown)} of {len(jobs)} jobs, idlest first (click a row to open the job; a header to "
        "sort) · recoverable: what the findings' fixes would give back; SM activity: the job's page"
    )
    tables.listing(shown, COLUMNS, key="jobs_table", page="views/job.py", param="job_id")


def _headline(jobs: pd.DataFrame) -> None:
    """The window's jobs in four numbers, sums of the table below (drawn before it: the grid is
    the slowest element of the page for a browser to lay out)."""
    headline_tiles.show(
        [
            Tile("jobs", f"{len(jobs):,}"),
            Tile("allocated GPU-h", f"{jobs['allocated_h'].sum():,.2f}"),
            Tile("idle GPU-h", f"{jobs['idle_h'].sum():,.2f}"),
            Tile("jobs with findings", f"{int((jobs['findings'] > 0).sum()):,}"),
        ]
    )


if __name__ == "__main__":
    render()
