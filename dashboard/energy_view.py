"""Energy, money and MFU on the dashboard: the Job page's figures and the fleet view's MFU by
team, small sections the pages call (the figures are defined once, docs/analyzers.md).

- Job page: kWh (and how it was measured), idle-allocated kWh, CO2e where a grid intensity is
  set, money where a price applies (with the prices' note: the demo says its prices are
  examples), and MFU: measured where the SDK sent FLOPs, else DCGM's tensor-pipe activity,
  labelled as the proxy it is.
- Fleet view: the distribution of measured MFU per team (jobs whose SDK reported FLOPs) and,
  in a chart of its own, that of the proxy for the other jobs; one point per job, never mixed.
"""

from __future__ import annotations

from collections.abc import Hashable
from datetime import datetime
from typing import TYPE_CHECKING

import altair as alt
import pandas as pd
import streamlit as st

from analyzers.accounting.cost import Prices
from analyzers.mfu.measured import job_mfu
from analyzers.mfu.mfu import proxy_mfu
from analyzers.run.window import Window
from dashboard import state
from dashboard.headline_tiles import Tile

if TYPE_CHECKING:
    from analyzers.reports.job import JobSummary

# Keyed by the warehouse's data version (`state.data_version`), read again only on new data: with
# a 10 s TTL every open after 10 s recomputed them (bench/RESULTS.md, "Dashboard first meaningful
# paint, wave 6").
_KEEP_S = 600.0


def measured_by_job(key: str, start: datetime, end: datetime) -> pd.DataFrame:
    """The window's measured MFU per job (jobs whose SDK reported FLOPs), with team."""
    return _measured_by_job(key, start, end, state.data_version(key))


@st.cache_data(ttl=_KEEP_S, show_spinner=False, max_entries=32)
def _measured_by_job(key: str, start: datetime, end: datetime, version: Hashable) -> pd.DataFrame:
    found = job_mfu(state.cursor(key, start, end), Window(start, end))
    rows = [
        (job, 100 * mfu.value, row["gpu_model"], row["dtype"]) for job, (mfu, row) in found.items()
    ]
    frame = pd.DataFrame(rows, columns=["job_id", "mfu_pct", "gpu_model", "dtype"])
    meta = state.jobs_meta(key)
    if not frame.empty and "team" in meta:
        frame = frame.merge(meta[["job_id", "team"]], on="job_id", how="left")
    return frame


def job_tiles(summary: JobSummary, prices: Prices) -> tuple[list[Tile], str | None]:
    """The Job page's energy, money and MFU tiles from `fleetscope job`'s summary, priced with
    `prices` (the page's other tiles come from it too, so the two never disagree and the job is
    read once: it was read twice, 0.3-0.5 s of a cold open), and the prices' note under them."""
    tiles = []
    if summary.energy_kwh is None:
        tiles.append(Tile("Energy", "n/a", "no energy counter or power"))
    else:
        how = {"counter": "energy counter", "power": "power integrated", "mixed": "counter + power"}
        co2e = summary.co2e_kg
        said = how[summary.energy_source] + ("" if co2e is None else f" · {co2e:,.2f} kg CO2e")
        tiles.append(Tile("Energy", f"{summary.energy_kwh:,.2f} kWh", said))
        tiles.append(Tile("Idle-allocated energy", f"{summary.idle_energy_kwh or 0.0:,.2f} kWh"))
    money = summary.money
    tiles.append(
        Tile(
            "Cost",
            "n/a" if money is None else f"{money:,.2f} {summary.currency}",
            "no price set" if money is None else f"{summary.allocated_gpu_hours:,.2f} GPU-h",
        )
    )
    note = prices.note if money is not None and prices.note else None
    measured = summary.mfu
    if measured is not None:
        mfu = Tile(
            "MFU (measured)",
            measured.percent,
            "the SDK's FLOPs per step",
            help=f"Model FLOPs utilization: {measured.basis}",
        )
        return [*tiles, mfu], note
    proxy = proxy_mfu(summary.tensor_frac)
    proxied = Tile(
        "MFU" if proxy is None else "MFU (proxy)",
        "n/a" if proxy is None else f"{100 * proxy.value:.1f} %",
        "measured: needs the SDK's FLOPs" if proxy is None else "DCGM tensor-pipe active",
        help=None if proxy is None else f"{proxy.label}: not measured MFU ({proxy.basis})",
    )
    return [*tiles, proxied], note


def measured_chart(measured: pd.DataFrame) -> alt.Chart:
    """Measured MFU per job as ticks per team, coloured by GPU model and dtype. The legend sits
    below with whole labels: on the right, Vega-Lite cut "NVIDIA H100 80GB HBM3 · bf16" at
    160 px ("NVIDIA H100 80GB H…"), and the model is what tells two ticks apart."""

    shown = measured.copy()
    shown["team"] = shown["team"].fillna("(no team)") if "team" in shown else "(no team)"
    shown["gpu"] = shown["gpu_model"].astype(str) + " · " + shown["dtype"].astype(str)
    legend = alt.Legend(orient="bottom", direction="vertical", labelLimit=0, titleLimit=0)
    chart: alt.Chart = (
        alt.Chart(shown)
        .mark_tick(thickness=2, size=18)
        .encode(
            x=alt.X("mfu_pct:Q", title="MFU % (measured)"),
            y=alt.Y("team:N", title=None),
            color=alt.Color("gpu:N", title="GPU model · dtype", legend=legend),
            tooltip=["job_id", "team", "gpu", alt.Tooltip("mfu_pct:Q", format=".1f")],
        )
    )
    return chart


def show_mfu_by_team(per_job: pd.DataFrame, measured: pd.DataFrame) -> None:
    """The fleet view's MFU distribution by team: measured MFU of the jobs whose SDK reported
    FLOPs, then DCGM's tensor-pipe activity of the other jobs (the proxy; jobs without it are
    left out and counted): two charts, never one axis."""

    st.subheader("MFU by team (measured: the SDK's FLOPs per step)")
    if measured.empty:
        st.caption("No job's SDK reported FLOPs per step in this window (sdk.report_flops).")
    else:
        st.altair_chart(measured_chart(measured), width="stretch")
        st.caption(
            "One tick per job: FLOPs per step x steps per second / (GPUs x the dense datasheet "
            "peak of the GPU model and dtype)."
        )
    others = per_job[~per_job["job_id"].isin(measured["job_id"])] if not measured.empty else per_job
    st.subheader("MFU proxy by team (DCGM tensor-pipe activity, the other jobs)")
    if "tensor_active_pct" not in others or others["tensor_active_pct"].isna().all():
        st.caption("No other job reports DCGM_FI_PROF_PIPE_TENSOR_ACTIVE in this window.")
        return
    per_job = others
    jobs = per_job[per_job["tensor_active_pct"].notna()].copy()
    jobs["team"] = jobs["team"].fillna("(no team)") if "team" in jobs else "(no team)"
    chart = (
        alt.Chart(jobs)
        .mark_tick(thickness=2, size=18)
        .encode(
            x=alt.X("tensor_active_pct:Q", title="tensor-pipe active % (MFU proxy)"),
            y=alt.Y("team:N", title=None),
            tooltip=["job_id", "team", alt.Tooltip("tensor_active_pct:Q", format=".1f")],
        )
    )
    st.altair_chart(chart, width="stretch")
    left_out = int(per_job["tensor_active_pct"].isna().sum())
    st.caption(
        "One tick per job. A proxy, not measured MFU: a busy tensor pipe is not all model work."
        + (f" {left_out} job(s) report no tensor-pipe activity." if left_out else "")
    )
