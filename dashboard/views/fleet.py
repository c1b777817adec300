"""Fleet page: where the fleet's GPU-hours went in a window, and which jobs wasted the most.

The headline tiles are the window's totals read per (host, GPU, job) (`data.window_totals`: the
buckets' totals, drawn before the buckets are read); every other number comes from one cached scan
of the warehouse (`data.gpu_buckets`); opportunities are `analyzers.reports.ranking` over the
findings the analyzers stored (`dashboard.opportunities`). Read-only.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analyzers.plain import utc_span
from analyzers.quantiles.stored import step_of as percentiles_step
from analyzers.reports.ranking import counted
from analyzers.sharing.stored import shown_for
from dashboard import (
    charts,
    data,
    drawn,
    energy_view,
    headline_tiles,
    heat,
    opportunities,
    partial,
    state,
    tables,
    time_range,
)
from dashboard.findings_view import show_brief
from dashboard.headline_tiles import Tile
from dashboard.tables import Col

IDLEST_JOBS = 15
JOB_LINES = 8


def _settled(value: float) -> float:
    """`value` rounded at 1e-9 before it is shown: the same hours summed in another order (the
    embedded roll-ups, the fleet's raw scan) differ in the last bits, and a number exactly on a
    rounding edge (3.70 of 8.00 GPU-h is 46.25 %) must show the same digit on either path."""
    return round(value, 9)


def _fmt_h(hours: float) -> str:
    """Three significant digits, k and M past 10,000: five headline numbers share one row, and a
    longer value is cut ("12.00 GP…") at the browser widths a laptop has."""
    value, suffix = _settled(hours), ""
    if abs(value) >= 9999.5:
        value, suffix = value / 1e3, "k"
        if abs(value) >= 999.5:
            value, suffix = value / 1e3, "M"
    digits = 2 if abs(value) < 9.995 else 1 if abs(value) < 99.95 else 0
    return f"{value:,.{digits}f}{suffix} GPU-h"


def render() -> None:
    st.title("Fleet")
    current = state.settings()
    key = state.warehouse_key(current)
    label = time_range.window_picker()
    win = state.window(key, label)
    if win is None:
        st.info(state.no_samples(key))
        return
    state.show_missing(key, win)
    totals = state.totals_for(key, win)  # the buckets' totals, read without them: tiles first
    st.caption(
        f"{utc_span(win.start, win.end)} · {totals.gpus} GPUs · "
        f"{totals.jobs} jobs · buckets of {win.bucket_s // 60} min"
    )
    sm_tile = (
        Tile("SM-active", "n/a", "enable DCGM_FI_PROF_SM_ACTIVE")
        if totals.sm_h is None
        else Tile(
            "SM-active",
            _fmt_h(totals.sm_h),
            f"{_settled(100.0 * totals.sm_h / totals.sm_known_h):.1f} %",
        )
    )
    headline_tiles.show(
        [
            Tile("Allocated", _fmt_h(totals.allocated_h)),
            Tile(
                "Active",
                _fmt_h(totals.active_h),
                f"{_settled(totals.active_pct):.1f} % of allocated",
            ),
            sm_tile,
            Tile("Idle while allocated", _fmt_h(totals.idle_h)),
            Tile("Capacity seen", _fmt_h(totals.capacity_h)),
        ]
    )

    buckets = state.buckets_for(key, win)
    covered = partial.coverage(buckets, win.bucket_s, state.latest_sample(key))
    st.subheader("GPU-hours: allocated vs active vs SM-active")
    if _enough(buckets, win, label):
        drawn.chart(charts.gpu_hours, partial.marked(data.gpu_hours_over_time(buckets), covered))

    jobs = state.jobs_for(key, win)
    _breakdowns(key, win, label, buckets, jobs, covered)

    left, right = st.columns([1, 3])
    with left:
        st.subheader("Percentiles")
        percentiles, caption = _percentiles(key, label, win, buckets)
        percentiles["quantile"] = [f"p{q * 100:g}" for q in percentiles["quantile"]]
        tables.static(
            percentiles,
            {"quantile": Col("percentile"), "active_pct": Col("active %", "%.1f")},
        )
        st.caption(caption)
    with right:
        found = state.opportunity_tables(key, win.start, win.end)
        _opportunities(found)

    st.subheader("Top findings")
    if not found.costliest:
        st.caption(
            "No findings stored for this window yet: the analyzers look at new data every "
            "scheduler.interval_s and write what they find."
        )
    for finding in found.costliest:
        show_brief(finding)

    st.subheader("Idlest jobs")
    st.caption("ranked by idle GPU-hours: allocated hours minus active hours")
    _idlest(jobs)


SKETCHED = (
    "active % of every sample of allocated GPUs (quantile sketches, within 1 %), "
    "as `fleetscope quantiles active_pct`"
)


def _percentiles(
    key: str, label: str, win: data.Window, buckets: pd.DataFrame
) -> tuple[pd.DataFrame, str]:
    """The window's percentiles and what they are, in words: the scheduled pass's stored ones
    when they answer the window (the Sharing page's rule, `shown_for`), else merged from the
    sketches now, else (no sketch kept yet) the bucket-mean approximation."""
    length = time_range.WINDOWS.get(label, win.end - win.start)
    step = percentiles_step(state.settings())
    stored = shown_for(state.stored_percentiles(key, length.total_seconds()), win.end, length, step)
    if stored is not None:
        doc = stored.document
        frame = pd.DataFrame({"quantile": doc["quantiles"], "active_pct": doc["values"]})
        return frame, (
            f"{SKETCHED}, over {utc_span(stored.window_start, stored.window_end)}: "
            f"computed at {stored.computed_at:%Y-%m-%d %H:%M} UTC by the scheduled analyzer pass"
        )
    merged = state.sketch_percentiles(key, win.start, win.end, win.bucket_s)
    if merged is None:  # no sketches kept yet: the bucket-mean approximation
        approximated = data.utilization_percentiles(buckets)
        return approximated, "active % of allocated GPUs per bucket, weighted by GPU-hours"
    return merged, SKETCHED


def _enough(
    buckets: pd.DataFrame, win: data.Window, label: str, series: pd.DataFrame | None = None
) -> bool:
    """Whether a time chart has something to draw; else an empty state that says why and what
    to do (a fresh install has minutes of data in a 7-day window of hourly buckets)."""
    allocated = buckets[buckets["job_id"].notna()]
    if allocated.empty or (series is not None and series.empty):
        st.info(
            "No allocated GPU in this window: no job held a GPU (the agents report job ids from "
            "the scheduler: docs/agent.md), or its GPUs report no utilization.",
            icon=":material/info:",
        )
        return False
    count = int(allocated["bucket"].nunique())
    if count < 3:
        minutes = win.bucket_s // 60
        advice = (
            "the curve fills in as data arrives (hollow points: buckets the data covers in part)"
            if win.bucket_s <= 60
            else "pick a shorter window in the sidebar (the last hour has 1-minute buckets)"
        )
        st.caption(f"Only {count} bucket(s) of {minutes} min with data in the {label}: {advice}.")
    return True


# One breakdown of the window at a time, below the headline: Streamlit's lazy tabs run only the
# open tab's code, so a page open computes and draws one breakdown instead of four (up to five
# Vega views the browser lays out before the page settles; bench/RESULTS.md, "Dashboard first
# meaningful paint, wave 5").
BREAKDOWNS = (
    "Utilization by cluster",
    f"Utilization of the {JOB_LINES} largest jobs",
    "Heatmap by cluster and host",
    "MFU by team",
)


def _breakdowns(
    key: str,
    win: data.Window,
    label: str,
    buckets: pd.DataFrame,
    jobs: pd.DataFrame,
    covered: pd.Series,
) -> None:
    """The window broken down by cluster, largest job, host and team, one tab at a time (its
    label kept in the session: `fleet_breakdown`); a tab's frames are computed when it opens.
    `covered`: the buckets' `partial.coverage`, for hollow partial buckets."""
    by_cluster_tab, by_job_tab, heat_tab, mfu_tab = st.tabs(
        BREAKDOWNS, key="fleet_breakdown", on_change="rerun"
    )
    if by_cluster_tab.open:
        with by_cluster_tab:
            by_cluster = data.utilization_by(buckets, "cluster")
            if _enough(buckets, win, label, by_cluster):
                drawn.chart(
                    charts.utilization_lines,
                    partial.marked(by_cluster, covered),
                    "cluster",
                    "active % of allocated",
                )
    if by_job_tab.open:
        with by_job_tab:
            largest = jobs.nlargest(JOB_LINES, "allocated_h")["job_id"]
            by_job = data.utilization_by(buckets[buckets["job_id"].isin(largest)], "job_id")
            if _enough(buckets, win, label, by_job):
                drawn.chart(
                    charts.utilization_lines,
                    partial.marked(by_job, covered),
                    "job_id",
                    "active %",
                )
    if heat_tab.open:
        with heat_tab:
            st.caption(
                "colour: active % of the host's allocated GPU-hours (dark: a job holds the GPUs "
                "and they idle) · grey: no job held any GPU of the host"
            )
            drawn.chart(charts.heatmap, heat.host_cells(buckets), win.bucket_s)
    if mfu_tab.open:
        with mfu_tab:
            energy_view.show_mfu_by_team(jobs, energy_view.measured_by_job(key, win.start, win.end))


TREND = {
    "wasted_gpu_h": Col("recoverable GPU-h", "%.2f"),
    "trend": Col("trend"),
}


def _trend(table: pd.DataFrame) -> pd.DataFrame:
    """The change as words where a number would mislead: "new" when nothing came before."""
    return table.assign(
        trend=["new" if pd.isna(change) else f"{change:+.0f} %" for change in table["change_pct"]]
    )


def _opportunities(found: opportunities.OpportunityTables) -> None:
    st.subheader("Opportunities")
    if found.by_rule.empty:
        st.caption("No findings stored for this window yet (the analyzers write them).")
        return
    # the heading rounds as its rows do (it read "0.0" above a row of 0.03)
    total, previous = (
        tables.cell(v, TREND["wasted_gpu_h"].format)
        for v in (found.total_gpu_h, found.previous_total_gpu_h)
    )
    st.caption(
        f"{total} recoverable GPU-h (a job flagged by several rules counted once; previous window "
        f"{previous}), as `fleetscope opportunities`; trend: against the previous window of the "
        "same length"
    )
    priced = found.by_rule["wasted_gpu_h"] > 0
    if priced.any():
        tables.static(
            _trend(found.by_rule[priced]),
            {
                "rule_id": Col("rule", width="small"),
                "rule": Col("name"),
                **TREND,
                "findings": Col("findings", "%d"),
                "jobs": Col("jobs", "%d"),
            },
        )
    if not priced.all():  # as `fleetscope opportunities` prints them: below, not ranked at 0.00
        risks = found.by_rule[~priced]
        named = [
            f"{rule_id} {name} ({counted(int(n), 'finding')}, {counted(int(jobs), 'job')})"
            for rule_id, name, n, jobs in zip(
                risks["rule_id"], risks["rule"], risks["findings"], risks["jobs"], strict=True
            )
        ]
        st.caption(
            "Flagged, with no GPU-hours to recover (a risk, not idle time): " + "; ".join(named)
        )
    tables.static(
        _trend(found.by_team),
        {
            "team": Col("team"),
            **TREND,
            "findings": Col("findings", "%d"),
            "jobs": Col("jobs", "%d"),
            "top_rule": Col("top rule"),
        },
    )


IDLEST = {
    "job_id": Col("job"),
    "user": Col("user"),
    "team": Col("team"),
    "gpus": Col("GPUs", "%d"),
    "allocated_h": Col("allocated GPU-h", "%.2f"),
    "idle_h": Col("idle GPU-h", "%.2f"),
    "active_pct": Col("active %", "%.1f"),
}


def _idlest(jobs: pd.DataFrame) -> None:
    """The jobs with the most idle allocated hours; a row opens its job."""
    tables.listing(
        jobs.head(IDLEST_JOBS), IDLEST, key="idlest_jobs", page="views/job.py", param="job_id"
    )
    st.caption("click a row to open its job · every job of the window: the Jobs page")


if __name__ == "__main__":
    render()
