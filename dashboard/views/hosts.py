"""Hosts page: GPU health (XID, ECC, throttling, PCIe replays) and each agent's last contact.

Health counters are the window's increase (rules R16/R17); last contact is the newest sample and,
where the catalog tracks it, the agent's last batch. Read-only.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import data, headline_tiles, headlines, state, tables, time_range
from dashboard.headline_tiles import Tile
from dashboard.tables import Col


def render() -> None:
    st.title("Hosts")
    key = state.warehouse_key(state.settings())
    win = state.window(key, time_range.window_picker())
    if win is None:
        st.info(state.no_samples(key))
        return
    state.show_missing(key, win)
    health = state.host_health(key, win.start, win.end, win.bucket_s)
    health = data.with_agents(health, state.catalog_table(key, "hosts"))
    flagged = health[data.unhealthy(health)]
    head = headlines.hosts(health)  # `fleetscope hosts` prints the same numbers
    headline_tiles.show(
        [
            Tile("hosts", str(head["hosts"])),
            Tile("hosts with XID errors", str(head["hosts_with_xid"])),
            Tile("new ECC double-bit errors", str(head["new_ecc_dbe"])),
            Tile("hosts throttling", str(head["hosts_throttling"])),
        ]
    )
    _nodes(key, win)
    if flagged.empty:
        st.caption(
            "No host needs attention: no XID error, new double-bit ECC error, PCIe replay or "
            "throttling in this window."
        )
    else:
        st.subheader("Needs attention")
        tables.show(_readable(flagged), COLUMNS)
    st.subheader("Health of every host")
    tables.listing(
        _readable(health), COLUMNS, key="health_table", page="views/gpus.py", param="host"
    )
    st.caption(
        "Counters are what the window added (last minus first per GPU): ECC DBE are new "
        "double-bit ECC errors, throttled s the seconds clocks were held down by the power cap "
        "or by heat; XID is the last code seen. The DCGM panels of a host (temperature, clocks, power, memory, PCIe, NVLink): "
        "the GPUs page (click a host's row)."
    )


NODES = {
    "host": Col("host"),
    "cluster": Col("cluster"),
    "gpus": Col("GPUs", "%d"),
    "allocated_gpus": Col("allocated now", "%d"),
    "jobs_now": Col("jobs now", "%d"),
    "active_pct": Col("GPU active %", "%.1f"),
    "gpu_mem_max_gib": Col("GPU mem GiB", "%.1f"),
    "cpu_busy_pct": Col("CPU %", "%.1f"),
    "load1": Col("load", "%.1f"),
    "mem_used_pct": Col("host mem %", "%.0f"),
}


def _nodes(key: str, win: data.Window) -> None:
    """Per host, as ClusterCockpit lists nodes: GPU use, CPU load, memory, jobs running now."""
    from dashboard import nodes

    table = nodes.node_table(
        state.buckets_for(key, win), state.host_load(key, win.start, win.end, win.bucket_s)
    )
    table["gpu_mem_max_gib"] = table["gpu_mem_max_mib"] / 1024
    st.subheader("Nodes")
    if table.empty:
        st.info("No GPU samples in this window: pick a longer window in the sidebar.")
        return
    st.caption(
        "GPU active %: mean over every GPU of the host in the window, allocated or not · GPU mem: "
        "the most any GPU used · CPU % and load: whole-host means over the window (node_exporter) "
        "· host mem %: at the newest sample · allocated now / jobs now: in the host's newest "
        "bucket · click a row for the host's DCGM panels"
    )
    tables.listing(table, NODES, key="nodes_table", page="views/gpus.py", param="host")


COLUMNS = {
    "host": Col("host"),
    "cluster": Col("cluster"),
    "gpus": Col("GPUs", "%d"),
    "last_sample_utc": Col("last sample (UTC)"),
    "gpus_with_xid": Col("XID GPUs", "%d"),
    "xid_code": Col("last XID", "%d"),
    "ecc_dbe_new": Col("ECC DBE", "%d"),
    "pcie_replays_new": Col("PCIe replays", "%d"),
    "throttled": Col("throttled s power / thermal"),
    "temp_c_max": Col("max °C", "%.0f"),
}


def _readable(health: pd.DataFrame) -> pd.DataFrame:
    """Times as 24-hour UTC text; an XID code of 0 (none) left empty."""
    shown = health.copy()
    shown["last_sample_utc"] = [
        "-" if pd.isna(t) else f"{pd.Timestamp(t).tz_convert('UTC'):%Y-%m-%d %H:%M:%S}"
        for t in shown["last_sample"]
    ]
    shown["xid_code"] = shown["xid_code"].where(shown["xid_code"] > 0)
    shown["throttled"] = [
        f"{power:.0f} / {thermal:.0f}"
        for power, thermal in zip(
            shown["power_throttle_s"], shown["thermal_throttle_s"], strict=True
        )
    ]
    return shown


if __name__ == "__main__":
    render()
