"""The sidebar's time range and auto-refresh, as Grafana's pickers, kept in the page's link.

Why a module of its own: every page draws the same two pickers and reads the same codes from the
address (`?range=`, `?refresh=`, `&from=`/`&to=`); `dashboard.state` turns the choice into a
window over the warehouse's newest sample.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import streamlit as st

from fleetscope.settings import load_settings

__all__ = ["CUSTOM", "RANGES", "REFRESH", "WINDOWS", "window_picker"]

# The time ranges a page offers, as Grafana's picker: URL code (`?range=1h`), label, length.
RANGES: dict[str, tuple[str, timedelta]] = {
    "5m": ("last 5 minutes", timedelta(minutes=5)),
    "15m": ("last 15 minutes", timedelta(minutes=15)),
    "1h": ("last hour", timedelta(hours=1)),
    "6h": ("last 6 hours", timedelta(hours=6)),
    "24h": ("last 24 hours", timedelta(days=1)),
    "7d": ("last 7 days", timedelta(days=7)),
    "28d": ("last 28 days", timedelta(days=28)),
}
WINDOWS: dict[str, timedelta] = dict(RANGES.values())
# Auto-refresh intervals (`?refresh=30s`), seconds; "off" never reruns the page by itself.
REFRESH: dict[str, int] = {"off": 0, "10s": 10, "30s": 30, "1m": 60, "5m": 300}
CUSTOM = "custom range (UTC)"


def window_picker(default: str | None = None) -> str:
    """The sidebar's time range and auto-refresh, shared by every page, kept in the link.

    As Grafana's: `?range=` one of RANGES' codes, or `custom` with `&from=...&to=...` (UTC), and
    `?refresh=` one of REFRESH; a link opens the view it was copied from, and every page writes its
    choice back into the address (pages switched in the sidebar keep it through session state).
    Pages open on `dashboard.default_window` (a label or a code; the demo opens on the last hour).
    """
    labels = [*WINDOWS, CUSTOM]
    by_code = {code: label for code, (label, _) in RANGES.items()} | {"custom": CUSTOM}
    # The choice lives under keys of ours, not the widgets': Streamlit drops a widget's state on
    # a page switch, and every page draws its own picker from the choice kept here.
    if "time_range" not in st.session_state:
        if default is None:
            default = load_settings().dashboard.default_window
        default = by_code.get(default, default)
        linked = by_code.get(st.query_params.get("range", ""))
        st.session_state["time_range"] = linked or (
            default if default in WINDOWS else "last 7 days"
        )
    if "refresh" not in st.session_state:
        linked_refresh = st.query_params.get("refresh", "off")
        st.session_state["refresh"] = linked_refresh if linked_refresh in REFRESH else "off"
    side = st.sidebar
    label = str(
        side.selectbox("Time range", labels, index=labels.index(st.session_state["time_range"]))
    )
    refreshes = list(REFRESH)
    refresh = str(
        side.selectbox(
            "Auto-refresh", refreshes, index=refreshes.index(st.session_state["refresh"])
        )
    )
    st.session_state["time_range"], st.session_state["refresh"] = label, refresh
    st.query_params["range"] = next(code for code, name in by_code.items() if name == label)
    st.query_params["refresh"] = refresh
    if label != CUSTOM:
        for name in ("from", "to"):
            st.query_params.pop(name, None)
    _auto_refresh(REFRESH[refresh])
    return label


def _auto_refresh(every_s: int) -> None:
    """Rerun the whole page every `every_s` seconds (0: never), as Grafana's refresh picker: a
    fragment ticks in the browser's session and reruns the app once the interval has passed
    since the page was last drawn; the caption says when that was."""
    now = datetime.now(UTC)
    st.session_state["drawn_at"] = now
    if not every_s:
        return
    st.sidebar.caption(f"refreshed {now:%H:%M:%S} UTC · every {every_s} s", help=None)

    @st.fragment(run_every=timedelta(seconds=every_s))
    def tick() -> None:
        drawn = st.session_state.get("drawn_at", now)
        if datetime.now(UTC) - drawn >= timedelta(seconds=every_s * 0.9):
            st.rerun(scope="app")

    tick()
