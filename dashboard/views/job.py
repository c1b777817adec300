"""Job page: one job's GPUs over time, its step times and data wait, its findings and traces.

Opened from the fleet and jobs pages with `?job_id=...`. The profile button is the dashboard's one
write (a request through the profiling service, see `dashboard.actions`); telemetry is only read.
Each trace shows the headline its analysis stored on upload (`traces.summary`).
"""

from __future__ import annotations

import functools
import json
from datetime import datetime
from typing import Any

import pandas as pd
import streamlit as st

from analyzers.accounting.cost import Prices
from analyzers.plain import plain_record, utc_span, without_gpus
from dashboard import (
    actions,
    charts,
    data,
    drawn,
    energy_view,
    headline_tiles,
    jobinfo,
    state,
    time_range,
    trace_report,
)
from dashboard.findings_view import show_finding
from dashboard.headline_tiles import Tile
from fleetscope.errors import FleetscopeError

SERIES = (
    ("active_pct", "active %"),
    ("sm_active_pct", "SM activity %"),
    ("tensor_active_pct", "tensor activity %"),
    ("fb_used_mib", "memory used (MiB)"),
    ("power_w", "power (W)"),
)


def render() -> None:
    key = state.warehouse_key(state.settings())
    job_id = st.query_params.get("job_id", "")
    if not job_id:
        st.title("Job")
        win = state.window(key, time_range.window_picker())
        if win is None:
            st.info(state.no_samples(key))
            return
        state.show_missing(key, win)
        known = data.job_efficiency(state.buckets_for(key, win))["job_id"].tolist()
        choice = st.selectbox("Job", known, index=None, placeholder="pick a job")
        if choice:
            st.query_params["job_id"] = choice
            st.rerun()
        return
    st.title(f"Job {job_id}")
    scope = _scope(key)
    if scope is None:
        return
    start, end = scope
    newest = state.latest_sample(key)  # keys the job's frames: they are read again on new data
    gpus, steps, step_totals = state.job_series(key, job_id, start, end, newest)
    span_hosts = state.job_span_hosts(key, job_id, start, end, newest)
    if span_hosts is None:
        where = "in the warehouse" if start is None else "in the window picked in the sidebar"
        st.error(f"No GPU samples for job {job_id!r} {where}, and no step metrics.")
        _traces(key, job_id)  # a job known only by its uploaded trace (the demo's V100 trace)
        return
    span, hosts = span_hosts
    if gpus.empty:
        steps, step_totals = state.step_series(key, job_id, start, end, newest)
    catalog_row = _catalog_row(key, job_id)
    meta = [(f, catalog_row[f]) for f in ("user", "team", "name") if catalog_row.get(f)]
    if meta:
        st.caption(" · ".join(f"{f}: {v}" for f, v in meta))
    prices = Prices.from_settings(state.settings())
    summary = (
        None
        if gpus.empty
        else state.job_summary(key, job_id, start, end, newest, catalog_row.get("team"), prices)
    )
    tiles = _summary(summary, step_totals) if summary is not None else []
    note = None
    if summary is not None:
        energy, note = energy_view.job_tiles(summary, prices)
        tiles += energy
    headline_tiles.show(tiles)  # one block, drawn with the title (dashboard.headline_tiles)
    if note:
        st.caption(note)
    # the job's footprint (CPU, host memory) is read for the table under the headline, after it
    footprint = state.job_footprint(
        key, job_id, span.start, span.end, tuple(hosts), (start, end), newest
    )
    rows = jobinfo.about(
        span,
        hosts,
        int(gpus["gpu"].nunique()) if not gpus.empty else 0,
        catalog_row,
        newest,
        footprint,
    )
    left, right = st.columns([3, 2])
    left.table(pd.DataFrame(rows, columns=["job", "value"]).set_index("job"))
    with right:
        _profile_button(key, job_id)
        for host in hosts[:8]:
            st.page_link(
                "views/gpus.py", label=f"DCGM panels of {host}", query_params={"host": host}
            )

    if not gpus.empty:
        st.subheader("GPUs over time")
        left, right = st.columns(2)
        for number, (column, title) in enumerate(SERIES):
            if gpus[column].notna().any():
                side = left if number % 2 == 0 else right
                drawn.chart(charts.metric_lines, gpus, column, title, where=side)
        if not gpus["sm_active_pct"].notna().any():
            st.caption(
                "SM and tensor activity are off in dcgm-exporter's default CSV: enable "
                "DCGM_FI_PROF_SM_ACTIVE and DCGM_FI_PROF_PIPE_TENSOR_ACTIVE to see them."
            )

    st.subheader("Steps (from the training SDK)")
    if steps.empty:
        st.caption(
            "This job reported no step metrics (add the fleetscope SDK to the training loop)."
        )
    else:
        left, right = st.columns(2)
        drawn.chart(charts.metric_lines, steps, "step_time_s", "step time (s)", "rank", where=left)
        drawn.chart(
            charts.metric_lines, steps, "data_wait_pct", "data wait % of step", "rank", where=right
        )
    _findings(key, job_id, holds_gpus=not gpus.empty)
    _traces(key, job_id)


def _scope(key: str) -> tuple[datetime | None, datetime | None] | None:
    """Where to look for the job: everywhere (None, None) where one connection sees every day,
    else the window picked in the sidebar (fleet mode keeps no job index: a job is read from the
    pruned scan of that window); None when there is nothing to look in (the page said why)."""
    if not state.windowed(key):
        return None, None
    win = state.window(key, time_range.window_picker())
    if win is None:
        st.info(state.no_samples(key))
        return None
    state.show_missing(key, win)
    st.caption(
        f"Read from {utc_span(win.start, win.end)} (the window picked in the sidebar): "
        "pick a longer one for a job that ran earlier."
    )
    return win.start, win.end


def _catalog_row(key: str, job_id: str) -> dict[str, Any]:
    jobs = state.catalog_table(key, "jobs")
    if jobs.empty or "job_id" not in jobs.columns:
        return {}
    match = jobs[jobs["job_id"] == job_id]
    if match.empty:
        return {}
    return {str(k): v for k, v in match.iloc[0].to_dict().items() if not _missing(v)}


def _missing(value: Any) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _summary(summary: Any, step_totals: dict[str, float | None]) -> list[Tile]:
    """The job's headline: `fleetscope job`'s numbers (`analyzers.reports.job`), so the page and
    the CLI never disagree; step figures from the SDK's steps."""
    step_time = step_totals.get("step_time_s")
    wait = step_totals.get("data_wait_pct")
    return [
        Tile("GPUs", str(len(summary.per_gpu))),
        Tile("allocated GPU-h", f"{summary.allocated_gpu_hours:.2f}"),
        Tile("active", _share(summary.active_frac)),
        Tile("SM activity", _share(summary.sm_frac)),
        Tile("mean step time", "n/a" if step_time is None else f"{step_time:.3f} s"),
        Tile("data wait of step", "n/a" if wait is None else f"{wait:.1f} %"),
    ]


def _share(fraction: float | None) -> str:
    return "n/a" if fraction is None else f"{100 * fraction:.1f} %"


def _profile_button(key: str, job_id: str) -> None:
    if st.button("Request a profile", key="request_profile", icon=":material/speed:"):
        try:
            request_id = actions.request_profile(state.settings(), job_id)
        except FleetscopeError as exc:  # the service's own message (an unknown job, ...)
            st.error(f"Could not request a profile: {exc}")
        else:
            st.success(
                f"Profile requested (request {request_id}); the trace appears below once "
                "the agent has captured it."
            )


def _findings(key: str, job_id: str, *, holds_gpus: bool = True) -> None:
    """The job's stored findings; a job with no GPU sample is credited no GPU-hours (a step
    rule's estimate assumes a GPU per rank, which a CPU-only process does not hold)."""
    st.subheader("Findings")
    findings = data.job_findings(state.catalog_table(key, "findings"), job_id)
    if findings.empty:
        st.caption("No findings stored for this job.")
        return
    chains = state.catalog_table(key, "auto_profiles")
    for record in findings.to_dict("records"):
        # the closed loop's chain under the finding it started (analyzers.autoprofile)
        links = chains[chains["finding_id"] == record.get("finding_id")].to_dict("records")
        found = plain_record({str(k): v for k, v in record.items()})
        found = found if holds_gpus else without_gpus(found)
        show_finding(found, functools.partial(_chains, links) if links else None)


def _chains(links: list[dict[Any, Any]]) -> None:
    for link in links:
        _chain(link)


def _chain(link: dict[Any, Any]) -> None:
    """finding -> automatic profile -> the trace's evidence (analyzers.autoprofile)."""
    evidence = link.get("evidence")
    if isinstance(evidence, str):
        evidence = json.loads(evidence)
    head = f"Profiled automatically ({link.get('reason')}): request {link.get('request_id')}"
    if not isinstance(evidence, dict):
        st.markdown(f"**{head}** · waiting for the trace")
        return
    trace_id = str(link.get("trace_id"))
    st.markdown(f"**{head}** → trace `{trace_id}`")
    for found in evidence.get("trace_findings", []):
        st.markdown(f"- {found['rule_id']}: {found['title']}")
    price = evidence.get("price")
    if isinstance(price, dict):
        low, high = price["interval_ms"]
        st.markdown(
            f"What-if `{price['scenario']}`: step {price['step_ms']:.1f} → "
            f"{price['estimated_step_ms']:.1f} ms ({low:.1f}-{high:.1f}), "
            f"{price['gpu_hours_saved_per_week']:.1f} GPU-h/week"
        )
    if evidence.get("top_kernels"):
        st.dataframe(pd.DataFrame(evidence["top_kernels"]), hide_index=True)
    if evidence.get("stall_stack"):
        st.code(str(evidence["stall_stack"]))
    st.page_link("views/trace.py", label=f"trace {trace_id}", query_params={"trace_id": trace_id})


def _traces(key: str, job_id: str) -> None:
    st.subheader("Traces")
    traces = state.traces(key)
    mine = traces[traces["job_id"] == job_id]
    if mine.empty:
        st.caption("No trace captured for this job yet.")
        return
    stored = state.catalog_table(key, "traces")
    summaries = dict(zip(stored["trace_id"], stored["summary"], strict=True))
    for trace_id in mine["trace_id"]:
        st.page_link(
            "views/trace.py", label=f"trace {trace_id}", query_params={"trace_id": trace_id}
        )
        summary = summaries.get(trace_id)
        if isinstance(summary, str):
            summary = json.loads(summary)
        if isinstance(summary, dict):
            st.caption(" · ".join(trace_report.headline(summary)))


if __name__ == "__main__":
    render()
