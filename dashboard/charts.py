"""Altair chart builders: a DataFrame in, a chart out. No queries, no Streamlit calls.

Time axes are UTC on a 24-hour clock (a day's first tick shows its date), and every time chart
zooms and pans along time (mouse wheel, drag; double-click resets). Utilization axes are fixed to
0-100 % so two charts read the same.
"""

from __future__ import annotations

import altair as alt
import pandas as pd
from altair.utils.schemapi import UndefinedType

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
        # padding: a point on the first or last bucket is drawn whole, not cut at the plot's edge
        scale=alt.Scale(type="utc", padding=8),
        axis=alt.Axis(labelExpr=_UTC_LABEL, labelOverlap=True),
    )


def time_tooltip(field: str = "bucket") -> alt.Tooltip:
    return alt.Tooltip(f"{field}:T", title="time (UTC)", format="%Y-%m-%d %H:%M", formatType="utc")


def _zoom(chart: alt.Chart) -> alt.Chart:
    zoomed: alt.Chart = chart.interactive(bind_y=False)
    return zoomed


_MEASURE_COLOR = alt.Color(
    "measure:N",
    title=None,
    sort=["allocated", "active", "SM-active"],
    scale=alt.Scale(
        domain=["allocated", "active", "SM-active"], range=["#4c78a8", "#f58518", "#54a24b"]
    ),
    legend=alt.Legend(orient="top"),
)


def _covered(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with `partial` / `covered_pct` (dashboard.partial), every bucket whole if absent."""
    if "partial" in frame.columns:
        return frame
    return frame.assign(partial=False, covered_pct=100.0)


def gpu_hours(frame: pd.DataFrame) -> alt.LayerChart:
    """Allocated vs active vs SM-active GPU-hours per bucket (long frame from
    data.gpu_hours_over_time, marked by dashboard.partial): whole buckets as a line with filled
    points, partial ones (the newest, a fleet's first) as hollow points off the line, so a bucket
    holding a third of its minutes never reads as a drop and the next one as a doubling."""
    frame = _covered(frame)
    tooltip: list[alt.Tooltip | str] = [
        time_tooltip(),
        "measure:N",
        alt.Tooltip("gpu_h:Q", title="GPU-hours", format=".2f"),
        alt.Tooltip("covered_pct:Q", title="bucket covered %", format=".0f"),
    ]
    base = alt.Chart(frame).encode(
        x=time_x(),
        y=alt.Y("gpu_h:Q", title="GPU-hours per bucket"),
        color=_MEASURE_COLOR,
        tooltip=tooltip,
    )
    whole = base.transform_filter("!datum.partial")
    line = whole.mark_line(interpolate="step-after")
    points = whole.mark_point(filled=True, size=18)
    partial = base.transform_filter("datum.partial").mark_point(filled=False, size=60)
    chart = alt.LayerChart(layer=[line, points, partial], height=280)
    return chart.interactive(bind_y=False)


def utilization_lines(frame: pd.DataFrame, key: str, title: str) -> alt.LayerChart:
    """Mean active % over time, one line per value of `key` (cluster, job, GPU...), each bucket a
    point too (one bucket of data still shows); partial buckets hollow (dashboard.partial). The
    legend sits on the right with whole labels: below, eight job ids squeezed the plot away."""
    frame = _covered(frame)
    color = alt.Color(f"{key}:N", title=key, legend=alt.Legend(orient="right", labelLimit=320))
    tooltip: list[alt.Tooltip | str] = [
        time_tooltip(),
        f"{key}:N",
        alt.Tooltip("active_pct:Q", format=".1f"),
        alt.Tooltip("covered_pct:Q", title="bucket covered %", format=".0f"),
    ]
    base = alt.Chart(frame).encode(
        x=time_x(), y=alt.Y("active_pct:Q", title=title, scale=_PCT), color=color, tooltip=tooltip
    )
    whole = base.transform_filter("!datum.partial")
    chart = alt.LayerChart(
        layer=[
            whole.mark_line(),
            whole.mark_point(filled=True, size=18),
            base.transform_filter("datum.partial").mark_point(filled=False, size=60),
        ],
        height=280,
    )
    return chart.interactive(bind_y=False)


# Streamlit draws charts with autosize "fit", under which Vega-Lite ignores a number as the height
# of a chart whose y is discrete (host rows, streams, kernel names): the rows collapse to a few
# pixels and their labels overlap. A step per row (alt.Step) is kept.
ROW_STEP_PX = 22
MAX_ROWS_HEIGHT_PX = 1200


def row_step(rows: int, step_px: int = ROW_STEP_PX) -> alt.Step:
    """Pixels per discrete row: `step_px`, smaller for many rows so the chart stays under
    MAX_ROWS_HEIGHT_PX (labels then thin out instead of overlapping)."""
    return alt.Step(max(2, min(step_px, MAX_ROWS_HEIGHT_PX // max(rows, 1))))


UNALLOCATED_GREY = "#d0d0d0"


def heatmap(frame: pd.DataFrame, bucket_s: int) -> alt.LayerChart:
    """Per host (rows, grouped by cluster) and time bucket (cells spanning the bucket): the active
    % of its allocated GPUs (viridis: dark is allocated and idle), grey where no job held any GPU
    of the host (`dashboard.heat.host_cells`)."""
    labelled = frame.assign(
        row=frame["cluster"] + " / " + frame["host"],
        bucket_end=frame["bucket"] + pd.Timedelta(seconds=bucket_s),
    )
    rows = int(labelled["row"].nunique())
    step = row_step(rows)
    y = alt.Y(
        "row:N",
        title="cluster / host",
        sort="ascending",
        # full host labels, never "gpu-nod…"; every row labelled while they fit
        axis=alt.Axis(labelLimit=0, labelOverlap=step.step < 12),
    )
    tooltip: list[alt.Tooltip | str] = [
        "row:N",
        time_tooltip(),
        alt.Tooltip("active_pct:Q", title="active % of allocated", format=".1f"),
        alt.Tooltip("allocated_pct:Q", title="allocated % of GPU-hours", format=".0f"),
    ]
    base = alt.Chart(labelled).encode(x=time_x(), x2="bucket_end:T", y=y, tooltip=tooltip)
    free = base.transform_filter("datum.state == 'unallocated'").mark_rect(color=UNALLOCATED_GREY)
    held = (
        base.transform_filter("datum.state == 'allocated'")
        .mark_rect()
        .encode(
            color=alt.Color(
                "active_pct:Q",
                title="active % of allocated",
                scale=alt.Scale(domain=[0, 100], scheme="viridis"),
            )
        )
    )
    return alt.LayerChart(layer=[free, held], height=step)


def flat_scale(values: pd.Series) -> alt.Scale | UndefinedType:
    """A y scale for a series that never changes (0 W of a GPU without a power reading, 0 %
    tensor activity): one unit above the value (below too, off zero), so the axis reads "0, 0.5,
    1" where Vega-Lite, given a domain of one point, labelled every tick "0.000000". Undefined
    (Vega-Lite's own) for a series that moves."""
    known = values.dropna()
    if known.empty or known.min() != known.max():
        return alt.Undefined
    value = float(known.iloc[0])
    return alt.Scale(domain=[value, value + 1] if value == 0 else [value - 1, value + 1])


# The right-hand legend's rows: Vega-Lite draws one per series, about 20 px each at 1,440 px,
# under a title of about 28 px (a margin on both); past LEGEND_ROWS it ends with "... N entries".
LEGEND_ROW_PX = 21
LEGEND_TITLE_PX = 30
LEGEND_ROWS = 24


def metric_lines(frame: pd.DataFrame, column: str, title: str, by: str = "gpu") -> alt.Chart:
    """One metric over time, one line per `by` (the job page's per-GPU series).

    The legend sits on the right (Streamlit fits the whole chart into its height, so a legend
    below with a row per few GPUs would squeeze the plot away), and the chart is as tall as the
    legend's rows: at 240 px a 16-GPU job's legend was cut after its eleventh GPU."""
    shown = min(int(frame[by].nunique()), LEGEND_ROWS + 1)
    legend = alt.Legend(orient="right", labelLimit=150, symbolLimit=LEGEND_ROWS)
    chart: alt.Chart = (
        alt.Chart(frame)
        .mark_line()
        .encode(
            x=time_x(),
            y=alt.Y(f"{column}:Q", title=title, scale=flat_scale(frame[column])),
            color=alt.Color(f"{by}:N", title=by, legend=legend),
            tooltip=[time_tooltip(), f"{by}:N", alt.Tooltip(f"{column}:Q", format=".2f")],
        )
        .properties(height=max(240, LEGEND_TITLE_PX + LEGEND_ROW_PX * shown))
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
