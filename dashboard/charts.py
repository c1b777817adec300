"""Altair chart builders: a DataFrame in, a chart out. No queries, no Streamlit calls.

Time axes are UTC; utilization axes are fixed to 0-100 % so two charts read the same.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

_PCT = alt.Scale(domain=[0, 100])


def gpu_hours(frame: pd.DataFrame) -> alt.Chart:
    """Allocated vs active vs SM-active GPU-hours per bucket (long frame from data.gpu_hours_over_time)."""
    chart: alt.Chart = (
        alt.Chart(frame)
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("bucket:T", title="time (UTC)"),
            y=alt.Y("gpu_h:Q", title="GPU-hours per bucket"),
            color=alt.Color(
                "measure:N",
                sort=["allocated", "active", "SM-active"],
                scale=alt.Scale(range=["#4c78a8", "#f58518", "#54a24b"]),
            ),
            tooltip=["bucket:T", "measure:N", alt.Tooltip("gpu_h:Q", format=".2f")],
        )
        .properties(height=260)
    )
    return chart


def utilization_lines(frame: pd.DataFrame, key: str, title: str) -> alt.Chart:
    """Mean active % over time, one line per value of `key` (cluster, job, GPU...)."""
    chart: alt.Chart = (
        alt.Chart(frame)
        .mark_line()
        .encode(
            x=alt.X("bucket:T", title="time (UTC)"),
            y=alt.Y("active_pct:Q", title=title, scale=_PCT),
            color=alt.Color(f"{key}:N", legend=alt.Legend(orient="bottom", columns=4)),
            tooltip=["bucket:T", f"{key}:N", alt.Tooltip("active_pct:Q", format=".1f")],
        )
        .properties(height=240)
    )
    return chart


def heatmap(frame: pd.DataFrame) -> alt.Chart:
    """Active % per host (rows, grouped by cluster) and time bucket (columns)."""
    labelled = frame.assign(row=frame["cluster"] + " / " + frame["host"])
    rows = int(labelled["row"].nunique())
    chart: alt.Chart = (
        alt.Chart(labelled)
        .mark_rect()
        .encode(
            x=alt.X("bucket:T", title="time (UTC)"),
            y=alt.Y("row:N", title="cluster / host", sort="ascending"),
            color=alt.Color(
                "active_pct:Q", title="active %", scale=alt.Scale(domain=[0, 100], scheme="viridis")
            ),
            tooltip=["row:N", "bucket:T", alt.Tooltip("active_pct:Q", format=".1f")],
        )
        .properties(height=min(max(22 * rows, 100), 1200))
    )
    return chart


def metric_lines(frame: pd.DataFrame, column: str, title: str, by: str = "gpu") -> alt.Chart:
    """One metric over time, one line per `by` (the job page's per-GPU series)."""
    chart: alt.Chart = (
        alt.Chart(frame)
        .mark_line()
        .encode(
            x=alt.X("bucket:T", title="time (UTC)"),
            y=alt.Y(f"{column}:Q", title=title),
            color=alt.Color(f"{by}:N", legend=None),
            tooltip=["bucket:T", f"{by}:N", alt.Tooltip(f"{column}:Q", format=".2f")],
        )
        .properties(height=180)
    )
    return chart


def timeline(frame: pd.DataFrame) -> alt.Chart:
    """GPU kernels per stream as bars from start to end (ms from trace start); gaps stay blank."""
    chart: alt.Chart = (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("start_ms:Q", title="ms since trace start"),
            x2="end_ms:Q",
            y=alt.Y("stream:N", title="GPU stream"),
            color=alt.Color("kind:N", title="kernel kind"),
            tooltip=["name:N", "kind:N", alt.Tooltip("dur_us:Q", format=".1f")],
        )
        .properties(height=200)
    )
    return chart


def bars(frame: pd.DataFrame, x: str, y: str, title: str) -> alt.Chart:
    """Horizontal bars of `x` per `y`, longest first (breakdowns, top kernels)."""
    chart: alt.Chart = (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X(f"{x}:Q", title=title),
            y=alt.Y(f"{y}:N", sort="-x", title=None),
            tooltip=[f"{y}:N", alt.Tooltip(f"{x}:Q", format=".2f")],
        )
        .properties(height=max(32 * len(frame), 120))
    )
    return chart
