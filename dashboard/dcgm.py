"""The panels a Grafana + DCGM user looks at first, per GPU and host, and a job's host footprint.

NVIDIA's dcgm-exporter Grafana dashboard (grafana.com dashboard 12239) shows, per GPU: temperature,
power, SM clocks, memory clocks, utilization, framebuffer used, and the DCGM profiling fields
(PCIe and NVLink bytes). `gpu_panels` computes exactly those series from `gpu_samples` (columns
named by fleetscope.contract), bucketed like every other chart, one line per `host / GPU n`.
Memory is shown as a share of capacity (DCGM_FI_DEV_FB_USED / (FB_USED + FB_FREE)), power against
the board's power limit. dcgm-exporter's default counters publish no power limit, so the limit
comes from NVIDIA's datasheets by model name (`POWER_LIMIT_W`), and the chart says when it does not
know the model. Read-only queries; no Streamlit here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from analyzers.accounting.usage import query
from analyzers.run.window import Window

if TYPE_CHECKING:
    import duckdb

# Board power limits (TDP / max TGP) from NVIDIA's product datasheets, by DCGM's modelName.
POWER_LIMIT_W: dict[str, float] = {
    "NVIDIA H100 80GB HBM3": 700.0,  # H100 SXM5
    "NVIDIA H100 PCIe": 350.0,
    "NVIDIA H200": 700.0,
    "NVIDIA A100-SXM4-80GB": 400.0,
    "NVIDIA A100-SXM4-40GB": 400.0,
    "NVIDIA A100 80GB PCIe": 300.0,
    "NVIDIA A100-PCIE-40GB": 250.0,
    "NVIDIA L40S": 350.0,
    "NVIDIA L4": 72.0,
}


@dataclass(frozen=True)
class Panel:
    column: str
    title: str


PANELS: tuple[Panel, ...] = (
    Panel("temp_c", "temperature (°C)"),
    Panel("power_w", "power (W) against the board limit"),
    Panel("sm_clock_mhz", "SM clock (MHz)"),
    Panel("mem_clock_mhz", "memory clock (MHz)"),
    Panel("fb_used_pct", "memory used (% of capacity)"),
    Panel("util_pct", "GPU utilization (%)"),
    Panel("pcie_gb_s", "PCIe throughput, tx + rx (GB/s)"),
    Panel("nvlink_gb_s", "NVLink throughput, tx + rx (GB/s)"),
)


def gpu_panels(
    con: duckdb.DuckDBPyConnection, window: Window, hosts: list[str], job_id: str | None = None
) -> pd.DataFrame:
    """Per (bucket, host, GPU): the DCGM panels' means, and the GPU's power limit."""
    if not hosts:
        return pd.DataFrame(columns=["bucket", "gpu", *(p.column for p in PANELS)])
    frame = query(
        con,
        """
        SELECT epoch_ms(ts) // $bucket_ms * $bucket_ms AS bucket_ms,
               host || ' / GPU ' || gpu_index::VARCHAR
                 || coalesce('/mig' || mig_instance_id::VARCHAR, '') AS gpu,
               any_value(gpu_model) AS gpu_model,
               avg(temp_c) AS temp_c, avg(power_w) AS power_w,
               avg(sm_clock_mhz) AS sm_clock_mhz, avg(mem_clock_mhz) AS mem_clock_mhz,
               100 * avg(fb_used_mib / nullif(fb_used_mib + fb_free_mib, 0)) AS fb_used_pct,
               avg(gpu_util) AS util_pct,
               avg(pcie_tx_bytes_s + pcie_rx_bytes_s) / 1e9 AS pcie_gb_s,
               avg(nvlink_tx_bytes_s + nvlink_rx_bytes_s) / 1e9 AS nvlink_gb_s
        FROM gpu_samples
        WHERE ts >= to_timestamp($lo) AND ts < to_timestamp($hi)
          AND list_contains($hosts, host) AND ($job IS NULL OR job_id = $job)
        GROUP BY ALL ORDER BY 1, 2
        """,
        bucket_ms=window.bucket_s * 1000,
        lo=window.start.timestamp(),
        hi=window.end.timestamp(),
        hosts=hosts,
        job=job_id,
    )
    frame["bucket"] = pd.to_datetime(frame["bucket_ms"], unit="ms", utc=True)
    frame["power_limit_w"] = frame["gpu_model"].map(POWER_LIMIT_W)
    return frame.drop(columns=["bucket_ms"])


def hosts_in(con: duckdb.DuckDBPyConnection, window: Window) -> list[str]:
    rows = con.sql(
        "SELECT DISTINCT host FROM gpu_samples "
        "WHERE ts >= to_timestamp($lo) AND ts < to_timestamp($hi) ORDER BY host",
        params={"lo": window.start.timestamp(), "hi": window.end.timestamp()},
    ).fetchall()
    return [str(h) for (h,) in rows]


@dataclass(frozen=True)
class Footprint:
    """A job's CPU and host memory use (ClusterCockpit's job footprint), and where it came from."""

    source: str  # "the job's cgroup" or "whole hosts"
    cpu_mean_pct: float | None
    cpu_max_pct: float | None
    mem_max_gib: float | None
    mem_total_gib: float | None


def job_footprint(
    con: duckdb.DuckDBPyConnection, job_id: str, window: Window, hosts: list[str]
) -> Footprint | None:
    """From the job's own host rows (its cgroup, when the agent reads cgroups), else the whole
    hosts it ran on; None when the warehouse holds neither."""
    sql = """
        SELECT avg(cpu_user_pct + cpu_system_pct), max(cpu_user_pct + cpu_system_pct),
               max(mem_used_bytes) / 2^30, max(mem_total_bytes) / 2^30, count(*)
        FROM host_samples
        WHERE ts >= to_timestamp($lo) AND ts < to_timestamp($hi) AND {where}
    """
    params = {"lo": window.start.timestamp(), "hi": window.end.timestamp()}
    for source, where, extra in (
        ("the job's cgroup", "job_id = $job", {"job": job_id}),
        ("whole hosts", "job_id IS NULL AND list_contains($hosts, host)", {"hosts": hosts}),
    ):
        row = con.sql(sql.format(where=where), params={**params, **extra}).fetchall()[0]
        if row[4]:
            return Footprint(source, row[0], row[1], row[2], row[3])
    return None
