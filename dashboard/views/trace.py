"""Trace page: one trace as the analyzers report it (`analyzers.traces.analyze_trace`): the GPU
time breakdown, kernels per stream with idle time by cause, top kernels, what-if estimates, the
trace rules' findings, and a link that opens it in Perfetto UI. Read-only."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from dashboard import charts, state, trace_report
from fleetscope.errors import TraceError

PERFETTO_UI = "https://ui.perfetto.dev/"
TIMELINE_OPS = 5000  # most ops drawn: the first ones (a caption says how many there are)


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
    path = Path(str(record["path"]))
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
    try:
        view = _view(str(path), path.stat().st_mtime_ns, hta)
    except (OSError, TraceError) as exc:
        st.error(f"Cannot read this trace: {exc}")
        return
    st.link_button("Open in Perfetto UI", PERFETTO_UI, icon=":material/open_in_new:")
    st.caption(f"Perfetto opens local files: download {path.name} and drop it on the page.")
    st.download_button("Download trace", path.read_bytes(), file_name=path.name)
    if not view.ranks:
        st.info("This trace holds no GPU kernels (a CPU-only trace).")
        return
    rank = min(view.ranks)
    if len(view.ranks) > 1:
        rank = st.selectbox("Rank", list(view.ranks), key="trace_rank")
    _rank(view.ranks[rank])
    for note in view.notes:
        st.caption(note)


def _rank(view: trace_report.RankView) -> None:
    cols = st.columns(4)
    cols[0].metric("GPU busy span", f"{view.kernel_time_us / 1000:,.1f} ms")
    cols[1].metric("idle", f"{view.idle_pct:.1f} %")
    cols[2].metric("compute", f"{view.compute_pct:.1f} %")
    cols[3].metric("GPU ops", f"{view.gpu_ops:,}")

    left, right = st.columns(2)
    with left:
        st.subheader("Time breakdown")
        st.altair_chart(charts.bars(view.breakdown, "time_ms", "category", "ms"), width="stretch")
    with right:
        st.subheader("What if")
        if view.whatif.empty:
            st.caption("Not estimated: the trace has no ProfilerStep ranges or launches to replay.")
        else:
            st.dataframe(
                view.whatif,
                hide_index=True,
                width="stretch",
                column_config={
                    "saved_pct": st.column_config.NumberColumn("saved %", format="%.1f"),
                    "gpu_h_per_week": st.column_config.NumberColumn("GPU-h / week", format="%.1f"),
                },
            )
    st.subheader("GPU timeline: kernels per stream")
    ops = view.ops
    shown = ops.head(TIMELINE_OPS).assign(
        start_ms=lambda f: f["start_us"] / 1000, end_ms=lambda f: f["end_us"] / 1000
    )
    if len(ops) > TIMELINE_OPS:
        st.caption(f"first {TIMELINE_OPS:,} of {len(ops):,} ops; blank space is GPU idle time")
    st.altair_chart(charts.timeline(shown), width="stretch")
    st.caption("Idle time per stream by cause (host wait: the launch came late)")
    st.dataframe(view.idle_by_stream, hide_index=True, width="stretch")
    st.subheader("Top kernels")
    st.dataframe(
        view.top_kernels,
        hide_index=True,
        width="stretch",
        column_config={"share_pct": st.column_config.NumberColumn("share %", format="%.1f")},
    )
    _findings(view)


def _findings(view: trace_report.RankView) -> None:
    st.subheader("Findings")
    if not view.findings:
        st.caption("The trace rules found nothing on this rank.")
        return
    for finding in view.findings:
        hours = finding["wasted_gpu_hours"]
        with st.expander(
            f"{finding['rule_id']} · {finding['severity']} · {finding['title']}"
            + (f" · {hours:.1f} GPU-h" if hours else ""),
        ):
            st.markdown(f"**Fix:** {finding['recommendation']}")
            st.caption(f"Estimate: {finding['estimate_method']}")
            st.json(finding["evidence"], expanded=False)


if __name__ == "__main__":
    render()
