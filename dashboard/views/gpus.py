"""GPUs page: the DCGM panels per GPU and host (temperature, power against the board limit, SM and
memory clocks, memory used as a share of capacity, utilization, PCIe and NVLink throughput), as a
Grafana + DCGM user knows them (`dashboard.dcgm`). Pick hosts in the sidebar; `?host=` preselects
one (the Hosts and Job pages link here). Read-only.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analyzers.plain import utc_span
from dashboard import charts, dcgm, drawn, headline_tiles, headlines, state, tables, time_range
from dashboard.headline_tiles import Tile
from dashboard.tables import Col


def render() -> None:
    st.title("GPUs")
    key = state.warehouse_key(state.settings())
    win = state.window(key, time_range.window_picker())
    if win is None:
        st.info(state.no_samples(key))
        return
    state.show_missing(key, win)
    known = state.hosts_in(key, win.start, win.end, win.bucket_s)
    wanted = [h for h in st.query_params.get_all("host") if h in known] or known[:1]
    hosts = st.sidebar.multiselect("Hosts", known, default=wanted, key="gpu_hosts")
    st.caption(
        f"{utc_span(win.start, win.end)} · buckets of {win.bucket_s // 60} min · "
        f"{len(hosts)} of {len(known)} hosts · one line per GPU"
    )
    if not hosts:
        st.info("Pick one or more hosts in the sidebar.")
        return
    frame = state.gpu_panels(key, win.start, win.end, win.bucket_s, tuple(hosts))
    summary = headlines.gpu_summary(frame)
    head = headlines.gpus(summary, len(hosts))  # `fleetscope gpus --host ...` prints the same
    headline_tiles.show(
        [
            Tile("GPUs", str(head["gpus"])),
            Tile("mean utilization", _or_dash(head["mean_util_pct"], "{:.1f} %")),
            Tile("hottest", _or_dash(head["max_temp_c"], "{:.0f} °C")),
        ]
    )
    show_panels(frame, rolled_up=dcgm.reads_rollups(win))
    st.subheader("Per GPU over the window")
    tables.show(summary, SUMMARY)


SUMMARY = {
    "gpu": Col("GPU"),
    "util_pct": Col("utilization % (mean)", "%.1f"),
    "temp_c": Col("°C (max)", "%.0f"),
    "power_w": Col("power W (mean)", "%.0f"),
    "fb_used_pct": Col("memory used % (max)", "%.0f"),
}


def _or_dash(value: float | None, form: str) -> str:
    return "-" if value is None else form.format(value)


def show_panels(frame: pd.DataFrame, rolled_up: bool = False) -> None:
    """The DCGM panels in two columns, each titled above its chart (the axis keeps a short
    title, AXIS_TITLES: a full one is clipped at a half-page chart's height); a panel without
    data says which counter is off, or, on a window read from the roll-ups, that they do not
    keep it."""

    left, right = st.columns(2)
    for number, item in enumerate(dcgm.PANELS):
        column = left if number % 2 == 0 else right
        if frame.empty or not frame[item.column].notna().any():
            why = (
                "not kept in the hourly roll-ups: pick a window of 2 days or less"
                if rolled_up and item.column in dcgm.NOT_ROLLED_UP
                else "not reported by this host's dcgm-exporter"
            )
            column.caption(f"{item.title}: {why}")
            continue
        limit = "power_limit_w" if item.column == "power_w" else None
        column.markdown(f"**{item.title}**" + (" (dashed)" if limit else ""))
        axis = AXIS_TITLES.get(item.column, item.title)
        drawn.chart(charts.panel, frame, item.column, axis, limit, where=column)


# Short y-axis titles for the panels whose full title (dcgm.PANELS, shown above the chart) is
# longer than the chart is tall.
AXIS_TITLES = {
    "power_w": "power (W)",
    "fb_used_pct": "memory used (%)",
    "pcie_gb_s": "PCIe (GB/s)",
    "nvlink_gb_s": "NVLink (GB/s)",
}


if __name__ == "__main__":
    render()
