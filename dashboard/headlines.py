"""The headline numbers of the Hosts, GPUs and Traces pages, computed once for the page and for its
CLI counterpart (`fleetscope hosts`, `fleetscope gpus`, `fleetscope traces`, dashboard.listing_cli),
so the two always agree for the same window (issue 31). Pure: frames in, numbers out.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

# The per-GPU summary of the GPUs page: column -> how the window's buckets are folded.
GPU_SUMMARY = {
    "util_pct": "mean",
    "temp_c": "max",
    "power_w": "mean",
    "fb_used_pct": "max",
}


def hosts(health: pd.DataFrame) -> dict[str, int]:
    """Hosts seen, hosts with XID errors, new double-bit ECC errors, hosts throttling."""
    throttled = health["thermal_throttle_s"] + health["power_throttle_s"] > 0
    return {
        "hosts": len(health),
        "hosts_with_xid": int((health["xid_samples"] > 0).sum()),
        "new_ecc_dbe": int(health["ecc_dbe_new"].sum()),
        "hosts_throttling": int(throttled.sum()),
    }


def gpu_summary(panels: pd.DataFrame) -> pd.DataFrame:
    """Per GPU over the window (`dashboard.dcgm.gpu_panels`' buckets): mean utilization and power,
    hottest temperature, most memory used; the GPU names sort as the panels' legends do."""
    columns = ["gpu", *GPU_SUMMARY]
    if panels.empty:
        return pd.DataFrame(columns=columns)
    folded = panels.groupby("gpu", sort=True).agg(GPU_SUMMARY).reset_index()
    return folded[columns]


def gpus(summary: pd.DataFrame, hosts_shown: int) -> dict[str, Any]:
    """GPUs shown, their mean utilization, the hottest one's temperature (None without data)."""
    util = summary["util_pct"].dropna()
    temp = summary["temp_c"].dropna()
    return {
        "hosts": hosts_shown,
        "gpus": len(summary),
        "mean_util_pct": round(float(util.mean()), 1) if len(util) else None,
        "max_temp_c": round(float(temp.max())) if len(temp) else None,
    }


def traces(rows: pd.DataFrame) -> dict[str, int]:
    """Traces listed, the jobs they profile, how many show GPU kernels, how many were analysed."""
    gpu = rows["gpu"].astype(str) if "gpu" in rows.columns else pd.Series(dtype=str)
    return {
        "traces": len(rows),
        "jobs": int(rows["job_id"].dropna().nunique()) if len(rows) else 0,
        "with_gpu_kernels": int(gpu.str.startswith("GPU busy").sum()),
        "analysed": int((gpu != "-").sum()),
    }
