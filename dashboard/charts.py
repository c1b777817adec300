"""Altair chart builders: a DataFrame in, a chart out. No queries, no Streamlit calls.

Time axes are UTC on a 24-hour clock (a day's first tick shows its date), and every time chart
zooms and pans along time (mouse wheel, drag; double-click resets). Utilization axes are fixed to
0-100 % so two charts read the same.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

_PCT = alt.Scale(domain=[0, 100])
# 24-hour UTC labels: "14:30", "14:30:20" between whole minutes, the date at midnight
_UTC_LABEL = (
    "utcFormat(datum.value, utcseconds(datum.value) != 0 ? '%H:%M:%S' : "
    "(utchours(datum.value) == 0 && utcminutes(datum.value) == 0) ? '%d %b' : '%H:%M')"
)


def time_x(field: str = "bucket") -> alt.X:
    """The shared time axis: UTC scale, 24-hour labels."""
    return alt.X(
        f"{field}:T",
        title="time (UTC)",
        scale=alt.Scale(type="utc"),
        axis=alt.Axis(labelExpr=_UTC_LABEL, labelOverlap=True),
    )


def time_tooltip(field: str = "bucket") -> alt.Tooltip:
    return alt.Tooltip(f"{field}:T", title="time (UTC)", format="%Y-%m-%d %H:%M", formatType="utc")


def _zoom(chart: alt.Chart) -> alt.Chart:
    zoomed: alt.Chart = chart.interactive(bind_y=False)
    return zoomed


def gpu_hours(frame: pd.DataFrame) -> alt.Chart:
    """Allocated vs active vs SM-active GPU-hours per bucket (long frame from data.gpu_hours_over_time)."""
    chart: alt.Chart = (
        alt.Chart(frame)
        .mark_line(interpolate="step-after")
        .encode(
            x=time_x(),
            y=alt.Y("gpu_h:Q", title="GPU-hours per bucket"),
            color=alt.Color(
                "measure:N",
                sort=["allocated", "active", "SM-active"],
                scale=alt.Scale(range=["#4c78a8", "#f58518", "#54a24b"]),
            ),
            tooltip=[time_tooltip(), "measure:N", alt.Tooltip("gpu_h:Q", format=".2f")],
        )
        .properties(height=260)
    )
    return _zoom(chart)


def utilization_lines(frame: pd.DataFrame, key: str, title: str) -> alt.Chart:
    """Mean active % over time, one line per value of `key` (cluster, job, GPU...)."""
    chart: alt.Chart = (
        alt.Chart(frame)
        .mark_line()
        .encode(
            x=time_x(),
            y=alt.Y("active_pct:Q", title=title, scale=_PCT),
            color=alt.Color(
                f"{key}:N", legend=alt.Legend(orient="bottom", columns=2, labelLimit=220)
            ),
            tooltip=[time_tooltip(), f"{key}:N", alt.Tooltip("active_pct:Q", format=".1f")],
        )
        .properties(height=240)
    )
    return _zoom(chart)


# Streamlit draws charts with autosize "fit", under which Vega-Lite ignores a number as the height
# of a chart whose y is discrete (host rows, streams, kernel names): the rows collapse to a few
# pixels and their labels overlap. A step per row (alt.Step) is kept.
ROW_STEP_PX = 22
MAX_ROWS_HEIGHT_PX = 1200


def row_step(rows: int, step_px: int = ROW_STEP_PX) -> alt.Step:
    """Pixels per discrete row: `step_px`, smaller for many rows so the chart stays under
    MAX_ROWS_HEIGHT_PX (labels then thin out instead of overlapping)."""
    return alt.Step(max(2, min(step_px, MAX_ROWS_HEIGHT_PX // max(rows, 1))))


def heatmap(frame: pd.DataFrame, bucket_s: int) -> alt.Chart:
    """Active % per host (rows, grouped by cluster) and time bucket (cells spanning the bucket)."""
    labelled = frame.assign(
        row=frame["cluster"] + " / " + frame["host"],
        bucket_end=frame["bucket"] + pd.Timedelta(seconds=bucket_s),
    )
    rows = int(labelled["row"].nunique())
    step = row_step(rows)
    chart: alt.Chart = (
        alt.Chart(labelled)
        .mark_rect()
        .encode(
            x=time_x(),
            x2="bucket_end:T",
            y=alt.Y(
                "row:N",
                title="cluster / host",
                sort="ascending",
                # full host labels, never "gpu-nod…"; every row labelled while they fit
                axis=alt.Axis(labelLimit=0, labelOverlap=step.step < 12),
            ),
            color=alt.Color(
                "active_pct:Q", title="active %", scale=alt.Scale(domain=[0, 100], scheme="viridis")
            ),
            tooltip=["row:N", time_tooltip(), alt.Tooltip("active_pct:Q", format=".1f")],
        )
        .properties(height=step)
    )
    return chart


def metric_lines(frame: pd.DataFrame, column: str, title: str, by: str = "gpu") -> alt.Chart:
    """One metric over time, one line per `by` (the job page's per-GPU series)."""
    chart: alt.Chart = (
        alt.Chart(frame)
        .mark_line()
        .encode(
            x=time_x(),
            y=alt.Y(f"{column}:Q", title=title),
            # legend on the right: Streamlit fits the whole chart into its height, so a legend
            # below with a row per few GPUs would squeeze the plot away
            color=alt.Color(f"{by}:N", title=by, legend=alt.Legend(orient="right", labelLimit=150)),
            tooltip=[time_tooltip(), f"{by}:N", alt.Tooltip(f"{column}:Q", format=".2f")],
        )
        .properties(height=240)  # room for a legend line per GPU of a host
    )
    return _zoom(chart)


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
        .properties(height=row_step(int(frame["stream"].nunique()), 40))
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
        .properties(height=row_step(len(frame), 32))
    )
    return chart


def panel(
    frame: pd.DataFrame, column: str, title: str, limit: str | None = None
) -> alt.Chart | alt.LayerChart:
    """A DCGM panel: one line per `host / GPU n` (legend below), and a dashed line at each GPU
    model's limit (`limit` column, e.g. the board power limit) when known."""
    lines = metric_lines(frame, column, title)
    if limit is None or limit not in frame.columns or frame[limit].isna().all():
        return lines
    caps = frame[["gpu_model", limit]].dropna().drop_duplicates()
    rule = (
        alt.Chart(caps)
        .mark_rule(strokeDash=[6, 4], color="#b00020")
        .encode(y=f"{limit}:Q", tooltip=["gpu_model:N", alt.Tooltip(f"{limit}:Q", title="limit")])
    )
    return alt.LayerChart(layer=[lines, rule])
