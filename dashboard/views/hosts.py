"""Hosts page: GPU health (XID, ECC, throttling, PCIe replays) and each agent's last contact.

Health counters are the window's increase (rules R16/R17); last contact is the newest sample and,
where the catalog tracks it, the agent's last batch. Read-only.
"""

from __future__ import annotations

import streamlit as st

from dashboard import data, state


def render() -> None:
    st.title("Hosts")
    key = state.warehouse_key(state.settings())
    win = state.window(key, state.window_picker())
    if win is None:
        st.info("The warehouse holds no GPU samples yet.")
        return
    health = state.host_health(key, win.start, win.end, win.bucket_s)
    health = data.with_agents(health, state.catalog_table(key, "hosts"))
    flagged = health[data.unhealthy(health)]
    cols = st.columns(4)
    cols[0].metric("hosts", len(health))
    cols[1].metric("hosts with XID errors", int((health["xid_samples"] > 0).sum()))
    cols[2].metric("new ECC double-bit errors", int(health["ecc_dbe_new"].sum()))
    cols[3].metric(
        "hosts throttling",
        int((health["thermal_throttle_s"] + health["power_throttle_s"] > 0).sum()),
    )
    if not flagged.empty:
        st.subheader("Needs attention")
        st.dataframe(flagged, hide_index=True, width="stretch")
    st.subheader("All hosts")
    st.dataframe(health, hide_index=True, width="stretch")


if __name__ == "__main__":
    render()
