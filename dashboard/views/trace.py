"""Trace page: one trace as the analyzers report it: the GPU time breakdown, kernels per stream
with idle time by cause, top kernels, what-if estimates, the trace rules' findings in plain
language, the per-step and data-loader tables `fleetscope profile` prints (CPU-only traces too),
and a button that hands the trace to Perfetto UI the way Perfetto documents for dashboards
(`dashboard.perfetto`). It draws the analysis the server stored when the trace was uploaded
(`dashboard.trace_report`); only the HTA toggle, or a trace nothing analyzed, runs the analyses
here. Read-only."""

from __future__ import annotations

from pathlib import Path

import streamlit as st
import streamlit.components.v1 as components

from analyzers.plain import plain, without_gpus
from dashboard import charts, drawn, headline_tiles, perfetto, state, tables, trace_report
from dashboard.findings_view import show_finding
from dashboard.headline_tiles import Tile
from dashboard.tables import Col
from fleetscope.errors import TraceError


@st.cache_data(show_spinner="Analyzing the trace…", max_entries=8)
def _view(path: str, mtime_ns: int, hta_compatible: bool) -> trace_report.TraceView:
    return trace_report.read_trace(Path(path), hta_compatible=hta_compatible)


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
    path = state.trace_file(key, trace_id, str(record["path"]))
    if record["job_id"]:
        st.page_link(
            "views/job.py",
            label=f"job {record['job_id']}",
            query_params={"job_id": str(record["job_id"])},
        )
    hta = st.toggle(
        "HTA 0.5.0 definitions",
        key="hta_compatible",
        help="As `fleetscope trace analyze --hta-compatible`: HTA's load rules and rounding, so "
        "the numbers agree with HTA's. Off: fleetscope's (exact timestamps, every step), as "
        "the profiling pipeline stores them.",
    )
    view = None if hta else state.stored_trace_view(key, trace_id)
    if view is None:
        try:
            view = _view(str(path), path.stat().st_mtime_ns, hta)
        except (OSError, TraceError) as exc:
            st.error(f"Cannot read this trace: {exc}")
            return
        if not hta:
            st.caption("No analysis was stored for this trace on upload: analysed here.")
    left, right = st.columns([1, 4])
    with left:
        st.download_button("Download trace", path.read_bytes(), file_name=path.name)
    with right:
        button = perfetto.open_button_html(path, f"fleetscope {trace_id}")
        if button is None:
            st.caption("Too large to hand to Perfetto UI from here: download it and open it there.")
        else:
            components.html(button, height=44)
    _steps(view)
    _findings(view)
    if not view.ranks:
        st.info("This trace holds no GPU kernels (a CPU-only trace): steps and data loader above.")
    else:
        rank = min(view.ranks)
        if len(view.ranks) > 1:
            rank = st.selectbox("Rank", list(view.ranks), key="trace_rank")
        whatif = (s.notes for s in view.sections.get(rank, ()) if s.name == "whatif")
        _rank(view.ranks[rank], next(whatif, ()))
    _every_analysis(view)
    for note in view.notes:
        st.caption(note)


STEP_COLUMNS = {
    "step": Col("step", "%d"),
    "duration_ms": Col("step time ms", "%.1f"),
    "gpu_busy_pct": Col("GPU busy %", "%.1f"),
    "dataloader_ms": Col("data loader ms", "%.1f"),
    "dataloader_pct": Col("data loader % of step", "%.1f"),
}


def _steps(view: trace_report.TraceView) -> None:
    """Per rank, what `fleetscope profile` prints: steps, mean step, data-loader share, then the
    per-step table (step time, GPU busy share, time in the DataLoader)."""
    st.subheader("Steps and data loader")
    if not view.steps:
        st.caption("No ProfilerStep ranges in this trace.")
        return
    for rank, steps in view.steps.items():
        mean = "n/a" if steps.mean_step_ms is None else f"{steps.mean_step_ms:,.1f} ms"
        loader = "n/a" if steps.dataloader_pct is None else f"{steps.dataloader_pct:.0f} %"
        headline_tiles.show(
            [
                Tile(f"rank {rank}: steps", f"{steps.steps:,}"),
                Tile("mean step", mean),
                Tile("data loader of step time", loader),
            ],
            key=f"fs_tiles_rank_{rank}",
        )
        # a CPU-only trace has no GPU to be busy: its column would read 0.0, as if a GPU idled
        shown = STEP_COLUMNS if view.ranks else without(STEP_COLUMNS, "gpu_busy_pct")
        tables.show(steps.table, shown)


def without(columns: dict[str, Col], name: str) -> dict[str, Col]:
    return {k: v for k, v in columns.items() if k != name}


def _rank(view: trace_report.RankView, whatif_notes: tuple[str, ...]) -> None:
    """`whatif_notes`: the replay's model and assumptions, read beside its estimates."""
    headline_tiles.show(
        [
            Tile("GPU busy span", f"{view.kernel_time_us / 1000:,.1f} ms"),
            Tile("idle", f"{view.idle_pct:.1f} %"),
            Tile("compute", f"{view.compute_pct:.1f} %"),
            Tile("GPU ops", f"{view.gpu_ops:,}"),
        ],
        key="fs_tiles_gpu",
    )

    st.subheader("Time breakdown")
    drawn.chart(charts.bars, view.breakdown, "time_ms", "category", "ms")
    # The what-if table has five columns and scenario names of a sentence: it takes the page's
    # width (in a half-width column it was cut off at the right, issue 31).
    st.subheader("What if")
    if view.whatif.empty:
        st.caption("Not estimated: the trace has no ProfilerStep ranges or launches to replay.")
    else:
        st.dataframe(
            view.whatif,
            hide_index=True,
            width="stretch",
            column_config={
                "step_ms": st.column_config.NumberColumn("step ms", format="%.1f"),
                "estimated_step_ms": st.column_config.NumberColumn(
                    "estimated step ms", format="%.1f"
                ),
                "saved_pct": st.column_config.NumberColumn("saved %", format="%.1f"),
                "gpu_h_per_week": st.column_config.NumberColumn("GPU-h / week", format="%.1f"),
            },
        )
        for note in whatif_notes:
            st.caption(note)
    st.subheader("GPU timeline: kernels per stream")
    shown = view.ops.assign(
        start_ms=lambda f: f["start_us"] / 1000, end_ms=lambda f: f["end_us"] / 1000
    )
    if view.gpu_ops > len(shown):  # the analysis keeps the first ones (its TIMELINE_OPS)
        st.caption(f"first {len(shown):,} of {view.gpu_ops:,} ops; blank space is GPU idle time")
    drawn.chart(charts.timeline, shown)
    st.caption("Idle time per stream by cause (host wait: the launch came late)")
    st.dataframe(view.idle_by_stream, hide_index=True, width="stretch")
    st.subheader("Top kernels")
    st.dataframe(
        view.top_kernels,
        hide_index=True,
        width="stretch",
        column_config={
            "mean_us": st.column_config.NumberColumn("mean_us", format="%.1f"),
            "share_pct": st.column_config.NumberColumn("share %", format="%.1f"),
        },
    )


def _every_analysis(view: trace_report.TraceView) -> None:
    """Every analysis the stored document holds, drawn the same way (tables and notes): an
    analysis module added to the registry shows here without an edit of this page."""
    if not view.sections:
        return
    st.subheader("Every analysis")
    ranks = list(view.sections)
    rank = ranks[0]
    if len(ranks) > 1:
        rank = st.selectbox("Rank", ranks, key="trace_analyses_rank")
    for section in view.sections[rank]:
        with st.expander(section.title):
            if not section.tables:
                st.caption("Nothing for this rank.")
            for name, table in section.tables:
                if len(section.tables) > 1:
                    st.caption(name.replace("_", " "))
                st.dataframe(table, hide_index=True, width="stretch")
            for note in section.notes:
                st.caption(note)


def _findings(view: trace_report.TraceView) -> None:
    st.subheader("Findings")
    if not view.findings:
        st.caption("The trace rules found nothing in this trace.")
        return
    for finding in sorted(view.findings, key=lambda f: -f.wasted_gpu_hours):
        if view.ranks:
            show_finding(plain(finding), gpu_hours_unit="GPU-h/week")
        else:  # a CPU-only process: no GPU-hours to recover (issue 31), said so, not "0"
            show_finding(without_gpus(plain(finding)), gpu_hours_unit="GPU-h/week", no_gpus=True)


if __name__ == "__main__":
    render()
