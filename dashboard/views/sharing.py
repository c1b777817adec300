"""Sharing page: `fleetscope plan sharing` for the window: co-locations of under-used GPUs (MIG,
MPS, time-slicing), the GPUs they free and each job's expected slowdown. Read-only: it plans,
it never changes a GPU (method: docs/sharing.md).

The plan shown is the one the scheduled analyzer pass stored when it answers the sidebar's window
(`analyzers.sharing.stored.shown_for`: the same length, ending at most one step before the
window's end), else the plan computed for the window on open; the caption says which, with the
plan's window and when it was computed (docs/sharing.md, "Stored plans")."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pandas as pd
import streamlit as st

from analyzers.sharing.plan import SharingThresholds
from analyzers.sharing.stored import PlanStep, shown_for
from dashboard import data, headline_tiles, state, tables, time_range
from dashboard.headline_tiles import Tile
from dashboard.tables import Col

# Pixel widths so that the ten columns and the row pickers fit 1,440 px without a scroll bar
# (Streamlit's "small" cuts a host name, "medium" is too wide for ten); the host and the GPU's
# index share one column, as a GPU is named on the GPUs page.
COLUMNS = {
    "group": Col("group", "%d", 55),
    "gpu": Col("model", width=95),
    "mechanism": Col("mechanism", width=75),
    "job_id": Col("job", width=225),
    "gpu_of_host": Col("GPU", width=115),
    "mig_profile": Col("MIG", width=65),
    "sm_mean_pct": Col("SM mean %", "%.0f", 80),
    "memory_peak_gib": Col("memory GiB", "%.1f", 80),
    "expected_slowdown_pct": Col("slowdown %", "%.0f", 80),
    "risk_slowdown_pct": Col("at risk %", "%.0f", 70),
}


def render() -> None:
    st.title("GPU sharing")
    current = state.settings()
    key = state.warehouse_key(current)
    label = time_range.window_picker()
    win = state.window(key, label)
    if win is None:
        st.info(state.no_samples(key))
        return
    state.show_missing(key, win)
    plan, source = _plan(key, label, win, PlanStep.from_settings(current))
    headline_tiles.show(
        [
            Tile("GPUs freed", str(plan["gpus_freed"])),
            Tile(
                "GPU-h/week freed",
                f"{plan['freed_gpu_hours_per_week']:.0f}",
                help="a projection: the GPUs freed x 168 h",
            ),
            Tile("Co-locations", str(len(plan["groups"]))),
        ]
    )
    st.caption(source)
    rows = pd.DataFrame(plan["rows"])
    if rows.empty:
        _why_empty(plan, label)
        return
    st.caption(
        "Each group shares one GPU; slowdowns are expected (means) and at risk (95th "
        "percentiles). Constraints and sources: docs/sharing.md."
    )
    rows["gpu_of_host"] = rows["host"] + " / " + rows["gpu_index"].astype(str)
    tables.listing(rows, COLUMNS, key="sharing_table", page="views/job.py", param="job_id")
    # One expander per mechanism, not per group: every group of a mechanism has its constraints
    # (analyzers.sharing.plan.CONSTRAINTS), and the 1,000-GPU week drew 91 identical expanders.
    numbers: dict[str, list[int]] = {}
    for n, group in enumerate(plan["groups"], 1):
        numbers.setdefault(group["mechanism"], []).append(n)
    for mechanism, groups in numbers.items():
        lines = plan["groups"][groups[0] - 1]["constraints"]
        with st.expander(f"{mechanism}: constraints ({_listed(groups)})"):
            st.markdown("\n".join(f"- {line}" for line in lines))


def _plan(key: str, label: str, win: data.Window, step: PlanStep) -> tuple[dict[str, Any], str]:
    """The plan for the sidebar's window and where it came from, in words: the scheduled pass's
    stored plan when it answers the window, else computed now (cached for the window)."""
    length = time_range.WINDOWS.get(label, win.end - win.start)
    stored = shown_for(
        state.stored_sharing_plan(key, length.total_seconds()), win.end, length, step
    )
    if stored is not None:
        said = (
            f"Plan of {_utc(stored.window_start)} – {_utc(stored.window_end)} UTC, computed at "
            f"{_utc(stored.computed_at)} UTC by the scheduled analyzer pass"
        )
        if stored.window_end < win.end:
            said += f" (renewed every {step.every_s / 3600:g} h; newer samples are in the next)"
        return stored.document, said + "."
    plan = state.sharing_plan(key, win.start, win.end, state.latest_sample(key))
    stores = (
        f"stores the last {step.days:g} days' plan every {step.every_s / 3600:g} h, none of this window"
        if step.days > 0
        else "stores no plan (analyzers.sharing_days = 0)"
    )
    return plan, (
        f"Plan of {_utc(win.start)} – {_utc(win.end)} UTC, computed on this open: the scheduled "
        f"analyzer pass {stores}."
    )


def _listed(groups: list[int]) -> str:
    """'group 3', 'groups 1-91' or 'groups 1, 4, 7': the groups' numbers in the table."""
    if len(groups) == 1:
        return f"group {groups[0]}"
    if groups == list(range(groups[0], groups[-1] + 1)):
        return f"groups {groups[0]}-{groups[-1]}"
    return "groups " + ", ".join(map(str, groups))


def _utc(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M}"


def _why_empty(plan: dict[str, Any], label: str) -> None:
    """Why no GPU was a candidate, as `fleetscope plan sharing` says it, with what to do."""
    th = SharingThresholds()
    reasons = plan.get("not_candidates", {})
    st.info(
        f"No co-location proposed over the {label}: {plan['candidates']} GPU(s) were under-used "
        "enough to share. A GPU is a candidate when one single-GPU job held it for at least "
        f"{th.min_hours:g} h of the window, busy (GPU_UTIL) at least {th.idle_util_pct:g} %, with "
        f"SM activity under {100 * th.max_sm_mean:.0f} % and memory under "
        f"{100 * th.max_memory_share:.0f} % of the GPU's.",
        icon=":material/info:",
    )
    if not reasons:
        st.caption("No allocated GPU in this window: pick a longer one in the sidebar.")
        return
    # A list rather than a table: the "what to do" sentences wrap instead of being cut off inside
    # a cell; the same "reason: count" words as `fleetscope plan sharing` ("too short: 31").
    st.markdown("**Why no GPU was a candidate** (GPUs per reason, as `fleetscope plan sharing`):")
    st.markdown(
        "\n".join(
            f"- **{reason}: {count}**"
            + (f" — {WHAT_TO_DO[reason]}" if reason in WHAT_TO_DO else "")
            for reason, count in sorted(reasons.items())
        )
    )


# What a reader does about each reason `analyzers.sharing.plan` gives (its `_reason` words).
WHAT_TO_DO = {
    "too short": "held under the minimum: sharing pays only for GPUs held long; a longer window "
    "(sidebar) counts more of a long-running job",
    "multi-GPU job": "sharing plans single-GPU jobs only",
    "already on MIG": "already shared",
    "busy": "the GPU is well used: nothing to share",
    "memory": "its memory footprint leaves no room for a second job",
}


if __name__ == "__main__":
    render()
